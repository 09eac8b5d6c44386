"""A tool call the model's end token (eos) ended inside a value, </parameter>, </function> and </tool_call> all left
out, is the call with that value running to the output's end, as vLLM's qwen3_coder parser reads it
(_parse_xml_function_call: a value with no true </parameter> runs to the end of the text, and an unclosed
<tool_call> / <function= at the end is still a call). Streamed, /v1 chat, the Responses API and /v1/messages closed
such a call and finished tool_calls / tool_use, while the same request unstreamed answered the markup as text with
finish stop (and Ollama's /api/chat answered text both ways). Now every route, streamed or not, gives the call; a stop
string that cuts the value still leaves it cut (tests/unit/test_tool_stop_cut.py)."""
import orjson
import pytest

from tests.unit.tool_deltas import chunk_calls

REPLY = "Sure.\n<tool_call>\n<function=run>\n<parameter=cwd>\n/tmp\n</parameter>\n<parameter=command>\nls -l\n"
EXPECTED = {"cwd": "/tmp", "command": "ls -l"}
SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}, "cwd": {"type": "string"}}}
MESSAGES = [{"role": "user", "content": "hi"}]
CHAT = {"model": "default", "messages": MESSAGES, "enable_thinking": False,
        "tools": [{"type": "function", "function": {"name": "run", "parameters": SCHEMA}}]}


def frames(raw: bytes) -> list:
    return [orjson.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]


async def post(client, path: str, body: dict):
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200
    return await response.read()


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions"], ids=["v1", "lmstudio-v0"])
async def test_chat_streamed_and_whole_give_the_call(stack, path):
    client, _ = stack
    choice = orjson.loads(await post(client, path, CHAT))["choices"][0]
    assert (choice["finish_reason"], choice["message"]["content"]) == ("tool_calls", "Sure.")
    assert [orjson.loads(c["function"]["arguments"]) for c in choice["message"]["tool_calls"]] == [EXPECTED]
    chunks = frames(await post(client, path, {**CHAT, "stream": True}))
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finish == ["tool_calls"]
    assert [orjson.loads(c["function"]["arguments"]) for c in chunk_calls(chunks)] == [EXPECTED]


async def test_responses_streamed_and_whole_give_the_call(stack):
    client, _ = stack
    body = {"model": "default", "input": "hi", "reasoning": {"effort": "none"},
            "tools": [{"type": "function", "name": "run", "parameters": SCHEMA}]}
    whole = orjson.loads(await post(client, "/v1/responses", body))
    streamed = frames(await post(client, "/v1/responses", {**body, "stream": True}))[-1]["response"]
    for response in (whole, streamed):
        assert response["status"] == "completed"
        assert [item["type"] for item in response["output"]] == ["message", "function_call"]
        assert orjson.loads(response["output"][1]["arguments"]) == EXPECTED


async def test_messages_streamed_and_whole_give_the_tool_use(stack):
    client, _ = stack
    body = {"model": "default", "max_tokens": 300, "messages": MESSAGES, "thinking": {"type": "disabled"},
            "tools": [{"name": "run", "input_schema": SCHEMA}]}
    whole = orjson.loads(await post(client, "/v1/messages", body))
    assert whole["stop_reason"] == "tool_use"
    assert [(b["type"], b.get("text") or b.get("input")) for b in whole["content"]] == [
        ("text", "Sure."), ("tool_use", EXPECTED)]
    events = frames(await post(client, "/v1/messages", {**body, "stream": True}))
    partial = "".join(e["delta"]["partial_json"] for e in events
                      if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta")
    assert orjson.loads(partial) == EXPECTED
    assert next(e for e in events if e["type"] == "message_delta")["delta"]["stop_reason"] == "tool_use"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_ollama_chat_gives_the_call(stack, stream):
    client, _ = stack
    raw = await post(client, "/api/chat", {**CHAT, "think": False, "stream": stream})
    lines = [orjson.loads(line) for line in raw.decode().splitlines() if line.strip()]
    assert "".join(line["message"]["content"] for line in lines) == "Sure."
    calls = [call["function"] for line in lines for call in line["message"].get("tool_calls") or []]
    assert [(call["name"], call["arguments"]) for call in calls] == [("run", EXPECTED)]
