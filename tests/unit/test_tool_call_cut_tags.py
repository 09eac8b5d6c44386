"""A tool call whose markup the model's end token (eos) cut inside a tag (`<parameter=comm`, `</param`, `</func`,
`</tool`) is the call with the parameters written before the cut, on every route, streamed or not.

`<tool_call>\\n<function=run>\\n<parameter=n>\\n3\\n</parameter>\\n<parameter=comm` then eos came back as text (the
whole markup in content, finish stop), and `...3\\n</param` then eos as the call with n = "3\\n</param" (the cut
closer read into an integer's value). vLLM's qwen3_coder streams such a call (its name, then each parameter once
its name's '>' is read; finish tool_calls); Ollama's parser drops the open call's text. A cut tag is markup: the
call is what was written before it. A stop string that cuts the output still leaves it text
(tests/unit/test_tool_stop_cut.py), and so does max_tokens."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.tool_filter import ToolCallFilter
from gateway.tools import read_tool_calls
from tests.unit.tool_deltas import chunk_calls

SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}, "n": {"type": "integer"}}}
TOOLS = [{"type": "function", "function": {"name": "run", "parameters": SCHEMA}}]
OPEN = "Sure.\n<tool_call>\n<function=run>\n<parameter=n>\n3\n</parameter>\n"
CUTS = {
    "param-name": (OPEN + "<parameter=comm", {"n": 3}),
    "param-open": (OPEN + "<param", {"n": 3}),
    "param-close": ("Sure.\n<tool_call>\n<function=run>\n<parameter=command>\nls -l\n</param", {"command": "ls -l"}),
    "inline-close": ("Sure.\n<tool_call>\n<function=run>\n<parameter=n>3</para", {"n": 3}),
    "function-close": (OPEN + "</func", {"n": 3}),
    "call-close": (OPEN + "</function>\n</tool", {"n": 3}),
    "first-param-name": ("Sure.\n<tool_call>\n<function=run>\n<parameter=comm", {}),
}


@pytest.mark.parametrize("case", CUTS.values(), ids=CUTS.keys())
def test_a_cut_tag_at_the_end_is_markup(case):
    text, arguments = case
    calls, content = read_tool_calls(text, TOOLS, open_end=True, eos=True)
    assert [(c["function"]["name"], orjson.loads(c["function"]["arguments"])) for c in calls] == [("run", arguments)]
    assert content == "Sure."
    # A stop string or max_tokens cut the output there: no call the model ended.
    assert read_tool_calls(text, TOOLS, open_end=True) is None
    assert read_tool_calls(text, TOOLS) is None


def test_a_value_that_only_ends_in_a_lone_angle_bracket_on_its_line_keeps_the_rest():
    calls, _ = read_tool_calls("<tool_call>\n<function=run>\n<parameter=command>\necho a <\n", TOOLS, True, eos=True)
    assert orjson.loads(calls[0]["function"]["arguments"]) == {"command": "echo a <"}


@pytest.fixture(params=["param-name", "param-close"])
async def cut_stack(request):
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    fake.script.reply = CUTS[request.param][0]
    async with fake_gateway(fake) as (client, _):
        yield client, CUTS[request.param][1]


async def _post(client, path: str, body: dict) -> bytes:
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200
    return await response.read()


def _frames(raw: bytes) -> list:
    return [orjson.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions"])
async def test_chat_gives_the_call_streamed_and_whole(cut_stack, path):
    client, expected = cut_stack
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, "enable_thinking": False}
    choice = orjson.loads(await _post(client, path, body))["choices"][0]
    assert (choice["finish_reason"], choice["message"]["content"]) == ("tool_calls", "Sure.")
    assert [orjson.loads(c["function"]["arguments"]) for c in choice["message"]["tool_calls"]] == [expected]
    chunks = _frames(await _post(client, path, {**body, "stream": True}))
    assert [orjson.loads(c["function"]["arguments"]) for c in chunk_calls(chunks)] == [expected]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == "Sure."
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_ollama_responses_and_messages_give_the_call(cut_stack, stream):
    client, expected = cut_stack
    raw = await _post(client, "/api/chat", {"model": "default", "messages": [{"role": "user", "content": "hi"}],
                                            "tools": TOOLS, "think": False, "stream": stream})
    lines = [orjson.loads(line) for line in raw.decode().splitlines() if line.strip()]
    assert [c["function"]["arguments"] for line in lines for c in line["message"].get("tool_calls") or []] == [expected]
    body = {"input": "hi", "reasoning": {"effort": "none"}, "stream": stream,
            "tools": [{"type": "function", "name": "run", "parameters": SCHEMA}]}
    raw = await _post(client, "/v1/responses", body)
    response = _frames(raw)[-1]["response"] if stream else orjson.loads(raw)
    assert [(i["type"], orjson.loads(i.get("arguments") or "null")) for i in response["output"]][1:] == [
        ("function_call", expected)]
    body = {"model": "default", "max_tokens": 300, "messages": [{"role": "user", "content": "hi"}],
            "thinking": {"type": "disabled"}, "tools": [{"name": "run", "input_schema": SCHEMA}], "stream": stream}
    raw = await _post(client, "/v1/messages", body)
    if stream:
        events = _frames(raw)
        partial = "".join(e["delta"]["partial_json"] for e in events
                          if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta")
        assert orjson.loads(partial or "{}") == expected
        assert next(e for e in events if e["type"] == "message_delta")["delta"]["stop_reason"] == "tool_use"
    else:
        message = orjson.loads(raw)
        assert message["stop_reason"] == "tool_use"
        assert [b.get("input") for b in message["content"] if b["type"] == "tool_use"] == [expected]


FIRST = "<tool_call>\n<function=run>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>\n"
OPENERS = {"name": "<tool_call>\n<function=ru", "tag": "<tool_call>\n<func", "bare": "<tool_call>"}


@pytest.mark.parametrize("opener", OPENERS.values(), ids=OPENERS.keys())
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_opener_the_end_token_cut_is_no_text(opener, stream):
    # "Sure.\n<tool_call>\n<function=ru" then eos answered content "Sure.\n<tool_call>\n<function=ru", and after a
    # whole call the cut opener came back as the content "<tool_call>\n<function=ru". vLLM's qwen3_coder streams
    # nothing of a call before its name's '>' and Ollama's parser drops an open call's text.
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, "enable_thinking": False, "stream": stream}
    async with fake_gateway(fake) as (client, _):
        for reply, calls in ((f"Sure.\n{opener}", []), (f"Sure.\n{FIRST}{opener}", [{"n": 3}])):
            fake.script.reply = reply
            raw = await _post(client, "/v1/chat/completions", body)
            if stream:
                chunks = _frames(raw)
                content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
                got = [orjson.loads(c["function"]["arguments"]) for c in chunk_calls(chunks)]
            else:
                message = orjson.loads(raw)["choices"][0]["message"]
                content = message["content"]
                got = [orjson.loads(c["function"]["arguments"]) for c in message.get("tool_calls") or []]
            assert (content, got) == ("Sure.", calls)
            ollama = await _post(client, "/api/chat", {**body, "model": "default", "think": False})
            lines = [orjson.loads(line) for line in ollama.decode().splitlines() if line.strip()]
            assert "".join(line["message"]["content"] for line in lines) == "Sure."
    # A stop string (or max_tokens) that cuts there leaves the text, as before.
    kept = ToolCallFilter(TOOLS)
    assert kept.push("Sure.\n" + opener) + kept.finish("stop", stop_string=True)[0] == "Sure.\n" + opener
