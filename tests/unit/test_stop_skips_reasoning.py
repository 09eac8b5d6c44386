"""Stop strings end the answer, never the thinking (vLLM #14170 / #38499, fixed by vLLM's 'skip stop in reasoning
content'; BERTopic #2481: a client's stop "\\n" ended a thinking model's turn at its first line). On every API that
splits the reasoning but Ollama's (whose runner reads them over the raw output), streamed or not; where nothing is
split (legacy completions) a stop string still cuts anywhere (fake scheduler)."""
import json

import pytest

REPLY = "Let me think.\nUser said hi.</think>\n\nHello world. Bye"
REASONING = "Let me think.\nUser said hi."
USER = [{"role": "user", "content": "hi"}]


async def _chat(client, extra: dict, stream: bool) -> tuple:
    """(reasoning, content, finish_reason, stop_reason) of a /v1 chat answer, reassembled when streamed."""
    response = await client.post("/v1/chat/completions", json={"messages": USER, **extra, "stream": stream})
    assert response.status == 200, await response.text()
    if not stream:
        choice = (await response.json())["choices"][0]
        message = choice["message"]
        return message["reasoning_content"], message["content"], choice["finish_reason"], choice["stop_reason"]
    reasoning, content, finish, reason = "", "", None, None
    for line in (await response.text()).splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                reasoning += choice["delta"].get("reasoning_content") or ""
                content += choice["delta"].get("content") or ""
                finish, reason = choice["finish_reason"] or finish, choice.get("stop_reason") or reason
    return reasoning, content, finish, reason


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("extra, expected", [
    # Before: the first two ended inside the thinking: ("Let me think.", "", "stop", "\n") and ("Let ", ...).
    ({"stop": ["\n"]}, (REASONING, "Hello world. Bye", "stop", None)),
    ({"stop": "me"}, (REASONING, "Hello world. Bye", "stop", None)),
    ({"stop": [" world", "me"]}, (REASONING, "Hello", "stop", " world")),
    ({"stop": [" world"], "include_stop_str_in_output": True}, (REASONING, "Hello world", "stop", " world")),
], ids=["newline", "word-in-reasoning-only", "word-in-answer", "include-stop"])
async def test_v1_chat_stop_strings_skip_the_reasoning(stack, extra, expected, stream):
    client, _ = stack
    assert await _chat(client, extra, stream) == expected


async def test_v1_chat_without_thinking_stops_anywhere_in_the_answer(stack):
    client, fake = stack
    fake.script.reply = "Hello world.\nBye"
    assert await _chat(client, {"stop": ["\n"], "enable_thinking": False}, False) == (None, "Hello world.", "stop",
                                                                                      "\n")


async def test_completions_have_no_reasoning_and_stop_anywhere(stack):
    client, _ = stack
    response = await client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 64, "stop": ["\n"]})
    choice = (await response.json())["choices"][0]
    assert (choice["text"], choice["finish_reason"], choice["stop_reason"]) == ("Let me think.", "stop", "\n")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_ollama_stop_option_ends_the_thinking_too(stack, stream):
    """Not Ollama's reading: its runner matches stop strings over the raw output, the thinking too
    (test_ollama_stop_in_thinking.py), so the first "." ends the turn inside the thinking."""
    client, _ = stack
    body = {"model": "fake-model", "messages": USER, "think": True, "stream": stream, "options": {"stop": ["\n", "."]}}
    response = await client.post("/api/chat", json=body)
    lines = [json.loads(line) for line in (await response.text()).splitlines() if line.strip()]
    thinking = "".join(line["message"].get("thinking") or "" for line in lines)
    content = "".join(line["message"]["content"] for line in lines)
    assert (thinking, content, lines[-1]["done_reason"]) == ("Let me think", "", "stop")


async def test_anthropic_stop_sequences_skip_the_thinking(stack):
    client, _ = stack
    body = {"model": "fake-model", "max_tokens": 64, "messages": USER,
            "thinking": {"type": "adaptive"}, "stop_sequences": ["\n", " world"]}
    answer = await (await client.post("/v1/messages", json=body)).json()
    blocks = [(block["type"], block.get("thinking") or block.get("text")) for block in answer["content"]]
    assert blocks == [("thinking", REASONING), ("text", "Hello")]
    assert (answer["stop_reason"], answer["stop_sequence"]) == ("stop_sequence", " world")
