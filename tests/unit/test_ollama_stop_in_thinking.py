"""Ollama's options.stop is matched in the whole output, the thinking too, streamed or not: its runner hands the
stop strings to llama-server's /completion, which cuts the raw generated text (the thinking is still in it) at the
first stop string, and only then do the handlers split the thinking off with the model's parser (ollama/ollama
llm/llama_server.go Completion: `Stop: req.Options.Stop`; server/routes.go GenerateHandler and ChatHandler parse
`cr.Content` after the runner; before 9db4bdbad the Go runner did the same, runner/ollamarunner/runner.go
common.FindStop over the pending raw text). BERTopic#2481 reports it from a running Ollama: a stop "\\n" ended a
thinking model's turn in its first line. Here the stop strings were read only after </think> (the vLLM rule, which
/v1 keeps: tests/unit/test_stop_skips_reasoning.py)."""
import orjson
import pytest

REPLY = "Let me think.\nUser said hi.</think>\n\nHello world. Bye"
USER = [{"role": "user", "content": "hi"}]


def _lines(raw: bytes) -> list:
    return [orjson.loads(line) for line in raw.splitlines() if line.strip()]


async def _chat(client, stop: list, stream: bool, think=True) -> tuple:
    body = {"model": "fake-model", "messages": USER, "think": think, "stream": stream, "options": {"stop": stop}}
    response = await client.post("/api/chat", json=body)
    assert response.status == 200, await response.text()
    objs = _lines(await response.read())
    thinking = "".join(o["message"].get("thinking") or "" for o in objs)
    content = "".join(o["message"]["content"] for o in objs)
    return thinking, content, objs[-1]["done_reason"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("stop, expected", [
    # Before: ("Let me think.\nUser said hi.", "Hello world", "stop") and (..., "", "stop") read past the thinking.
    ([".", "\n"], ("Let me think", "", "stop")),
    (["said"], ("Let me think.\nUser", "", "stop")),
    (["</think>"], ("Let me think.\nUser said hi.", "", "stop")),
    # A stop string only the answer holds still cuts the answer.
    ([" world"], ("Let me think.\nUser said hi.", "Hello", "stop")),
], ids=["first-line", "mid-thinking", "the-close-tag", "in-the-answer"])
async def test_chat_stop_is_matched_in_the_thinking(stack, stop, expected, stream):
    client, _ = stack
    assert await _chat(client, stop, stream) == expected


async def test_chat_without_thinking_stops_in_the_answer(stack):
    client, fake = stack
    fake.script.reply = "Hello world.\nBye"
    assert await _chat(client, ["\n"], False, think=False) == ("", "Hello world.", "stop")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_generate_stop_in_the_thinking_ends_the_context_there(stack, stream):
    """GenerateHandler's context is Tokenize(prompt + the raw text the runner gave), which ends before the stop
    string wherever it was (before: the thinking kept whole and the context ran to the answer's stop)."""
    client, fake = stack
    fake.script.reply = "I say STOP inside.\n</think>\n\nAnswer STOP here."
    body = {"model": "fake-model", "prompt": "Hi", "stream": stream, "options": {"stop": ["STOP"]}}
    objs = _lines(await (await client.post("/api/generate", json=body)).read())
    assert "".join(o["response"] for o in objs) == ""
    assert "".join(o.get("thinking", "") for o in objs) == "I say"
    final = objs[-1]
    assert final["done_reason"] == "stop"
    prompt = list(fake.script.requests[-1].prompt_token_ids)
    assert final["context"][:len(prompt)] == prompt
    assert fake.tokenizer.decode(final["context"][len(prompt):]) == "I say "
