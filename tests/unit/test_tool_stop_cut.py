"""A stop string that cuts a tool call the stream has begun (fake scheduler): the call is cut, as max_tokens cuts one
(its arguments stay as sent, the finish is the stop's, never tool_calls), on /v1 chat, the Responses API (the
function_call item incomplete) and /v1/messages (stop_sequence). The stream closed the cut arguments into a whole
call ({"command": ""}) and finished tool_calls, while the same request unstreamed answers the markup as text with
finish "stop" (vllm#42210: a stop string interrupting tool parsing); now that answer is the stream's too: the cut call
with the arguments sent, finish "stop" (test_cut_stream_whole)."""
import orjson
import pytest

REPLY = ("ok</think>\n\nHello there.\n<tool_call>\n<function=bash>\n<parameter=command>\nls -la\n</parameter>\n"
         "</function>\n</tool_call>")
SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}}
CHAT = {"model": "default", "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": SCHEMA}}]}


def frames(raw: bytes) -> list:
    return [orjson.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]


async def chat_stream(client, stop: str) -> tuple[str, dict]:
    response = await client.post("/v1/chat/completions", data=orjson.dumps({**CHAT, "stop": [stop], "stream": True}))
    assert response.status == 200
    content, calls, finish = "", {}, None
    for chunk in frames(await response.read()):
        for choice in chunk["choices"]:
            content += choice["delta"].get("content") or ""
            for call in choice["delta"].get("tool_calls") or []:
                calls[call["index"]] = calls.get(call["index"], "") + call["function"]["arguments"]
            finish = choice["finish_reason"] or finish
    return finish, {"content": content, "calls": calls}


@pytest.mark.parametrize("stop,sent", [("-la", '{"command":"ls '), ("</parameter>", '{"command":"ls -la')],
                         ids=["inside-the-value", "at-its-end-tag"])
async def test_a_call_cut_by_a_stop_string_stays_cut(stack, stop, sent):
    client, _ = stack
    finish, streamed = await chat_stream(client, stop)
    assert finish == "stop" and streamed == {"content": "Hello there.", "calls": {0: sent}}
    response = await client.post("/v1/chat/completions", data=orjson.dumps({**CHAT, "stop": [stop]}))
    whole = orjson.loads(await response.read())["choices"][0]
    assert whole["finish_reason"] == "stop" and whole["message"]["content"] == "Hello there."
    assert [c["function"]["arguments"] for c in whole["message"]["tool_calls"]] == [sent]


async def test_a_stop_string_after_the_call_leaves_it_whole(stack):
    client, _ = stack
    finish, streamed = await chat_stream(client, "</tool_call>")
    assert finish == "tool_calls" and streamed["calls"] == {0: '{"command":"ls -la"}'}


async def test_the_responses_call_item_is_incomplete(stack):
    client, _ = stack
    body = {"model": "default", "input": "hi", "stop": ["-la"], "stream": True,
            "tools": [{"type": "function", "name": "bash", "parameters": SCHEMA}]}
    response = await client.post("/v1/responses", data=orjson.dumps(body))
    events = frames(await response.read())
    done = [e["item"] for e in events if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"]
    assert [(item["status"], item["arguments"]) for item in done] == [("incomplete", '{"command":"ls ')]
    assert events[-1]["type"] == "response.completed"


async def test_the_messages_stream_ends_on_the_stop_sequence(stack):
    client, _ = stack
    body = {"model": "default", "max_tokens": 300, "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "bash", "input_schema": SCHEMA}], "stop_sequences": ["-la"], "stream": True}
    response = await client.post("/v1/messages", data=orjson.dumps(body))
    events = frames(await response.read())
    partial = "".join(e["delta"]["partial_json"] for e in events
                      if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta")
    end = next(e for e in events if e["type"] == "message_delta")
    assert partial == '{"command":"ls ' and end["delta"]["stop_reason"] == "stop_sequence"
    assert end["delta"]["stop_sequence"] == "-la"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("options", [{"stop": ["ls"]}, {"stop": ["<function"]}, {"num_predict": 30}],
                         ids=["stop-in-value", "stop-after-opener", "num-predict"])
async def test_ollama_drops_a_cut_call(stack, options, stream):
    """Ollama's /api/chat drops a call that max_tokens or a stop string cut (its parser reads a call only at its
    </tool_call>, model/parsers/qwen3coder.go): the answer is the text before it. The markup came back as content."""
    client, _ = stack
    body = {**CHAT, "options": options, "stream": stream}
    raw = await (await client.post("/api/chat", data=orjson.dumps(body))).read()
    lines = [orjson.loads(line) for line in raw.decode().splitlines() if line.strip()]
    assert "".join(line["message"]["content"] for line in lines) == "Hello there."
    assert not any(line["message"].get("tool_calls") for line in lines)
    assert lines[-1]["done_reason"] == ("length" if "num_predict" in options else "stop")
