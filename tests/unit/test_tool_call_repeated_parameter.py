"""A parameter the model gives twice in one call: the unstreamed answer reads the last value, as vLLM's qwen3_coder
(param_dict[name] = value) and Ollama's parser (Arguments.Set) do. A streamed /v1/responses function_call item ended
with the streamed pieces joined, '{"command":"ls","command":"pwd"}' (duplicate keys) in
response.function_call_arguments.done, response.output_item.done and response.completed, where the unstreamed item
has '{"command":"pwd"}'; now those carry the one object the whole output reads. The chat and Messages streams have
sent the first value before the repeat shows, so their pieces hold both keys, which every JSON reader reads as the
unstreamed object (the last key wins), as vLLM streams such a call."""
import json

import orjson

REPLY = ("Sure.\n<tool_call>\n<function=run>\n<parameter=command>\nls\n</parameter>\n<parameter=cwd>\n/tmp\n"
         "</parameter>\n<parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>")
WHOLE = '{"command":"pwd","cwd":"/tmp"}'
SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}, "cwd": {"type": "string"}}}
RESPONSES = {"model": "default", "input": "hi", "reasoning": {"effort": "none"},
             "tools": [{"type": "function", "name": "run", "parameters": SCHEMA}]}


def frames(raw: bytes) -> list:
    return [orjson.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]


async def test_the_streamed_function_call_item_has_the_unstreamed_arguments(stack):
    client, _ = stack
    whole = orjson.loads(await (await client.post("/v1/responses", json=RESPONSES)).read())
    assert [item.get("arguments") for item in whole["output"]] == [None, WHOLE]
    events = frames(await (await client.post("/v1/responses", json={**RESPONSES, "stream": True})).read())
    done = [e["arguments"] for e in events if e["type"] == "response.function_call_arguments.done"]
    items = [e["item"] for e in events if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"]
    completed = [item for item in events[-1]["response"]["output"] if item["type"] == "function_call"]
    assert events[-1]["type"] == "response.completed"
    assert done == [WHOLE] and [(i["status"], i["arguments"]) for i in items + completed] == [("completed", WHOLE)] * 2
    pieces = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    assert json.loads(pieces) == json.loads(WHOLE)


async def test_the_chat_stream_reads_as_the_unstreamed_arguments(stack):
    client, _ = stack
    body = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "enable_thinking": False,
            "tools": [{"type": "function", "function": {"name": "run", "parameters": SCHEMA}}]}
    whole = orjson.loads(await (await client.post("/v1/chat/completions", json=body)).read())
    assert [c["function"]["arguments"] for c in whole["choices"][0]["message"]["tool_calls"]] == [WHOLE]
    chunks = frames(await (await client.post("/v1/chat/completions", json={**body, "stream": True})).read())
    pieces = "".join(call["function"]["arguments"] for chunk in chunks for choice in chunk["choices"]
                     for call in choice["delta"].get("tool_calls") or [])
    assert json.loads(pieces) == json.loads(WHOLE)
