"""Test support: one user turn with tools on the four chat APIs (/v1/chat/completions, Ollama's /api/chat,
/v1/messages, /v1/responses), thinking off, streamed or not, each answer reduced to its text and the calls'
arguments in the model's order, so a test compares one scripted output across routes and stream modes."""
import json

import orjson

from tests.unit.tool_deltas import chunk_calls

USER = [{"role": "user", "content": "weather in Paris and Rome?"}]


def sse_events(raw: bytes) -> list:
    return [orjson.loads(line[6:]) for line in raw.decode().split("\n") if line.startswith("data: {")]


async def v1_answer(client, tools: list, stream: bool, max_tokens: int = 500) -> tuple:
    body = {"model": "fake-model", "messages": USER, "tools": tools, "enable_thinking": False, "stream": stream,
            "max_tokens": max_tokens}
    raw = await (await client.post("/v1/chat/completions", json=body)).read()
    if not stream:
        message = orjson.loads(raw)["choices"][0]["message"]
        return message["content"], [json.loads(c["function"]["arguments"]) for c in message.get("tool_calls") or []]
    chunks = [c for c in sse_events(raw) if c["choices"]]
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    return content, [json.loads(c["function"]["arguments"]) for c in chunk_calls(chunks)]


async def ollama_answer(client, tools: list, stream: bool, max_tokens: int = 500) -> tuple:
    body = {"model": "fake-model", "messages": USER, "tools": tools, "think": False, "stream": stream,
            "options": {"num_predict": max_tokens}}
    lines = (await (await client.post("/api/chat", json=body)).read()).splitlines()
    messages = [orjson.loads(line)["message"] for line in lines if line.strip()]
    return "".join(m["content"] for m in messages), [c["function"]["arguments"] for m in messages
                                                     for c in m.get("tool_calls") or []]


async def anthropic_answer(client, tools: list, stream: bool, max_tokens: int = 500) -> list:
    body = {"model": "fake-model", "max_tokens": max_tokens, "messages": USER, "thinking": {"type": "disabled"},
            "stream": stream, "tools": [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in tools]}
    raw = await (await client.post("/v1/messages", json=body)).read()
    if not stream:
        return [b.get("text") or b.get("input") for b in orjson.loads(raw)["content"]]
    blocks: dict = {}
    for event in sse_events(raw):
        if event["type"] == "content_block_start":
            blocks[event["index"]] = [event["content_block"]["type"], event["content_block"].get("text", "")]
        elif event["type"] == "content_block_delta":
            delta = event["delta"]
            blocks[event["index"]][1] += delta.get("text") or delta.get("partial_json") or ""
    return [json.loads(text) if kind == "tool_use" else text for kind, text in (blocks[i] for i in sorted(blocks))]


async def responses_answer(client, tools: list, stream: bool, max_tokens: int = 500) -> list:
    body = {"model": "fake-model", "input": USER[0]["content"], "reasoning": {"effort": "none"}, "stream": stream,
            "max_output_tokens": max_tokens,
            "tools": [{"type": "function", "name": t["function"]["name"], "parameters": t["function"]["parameters"]}
                      for t in tools]}
    raw = await (await client.post("/v1/responses", json=body)).read()
    ends = [e for e in sse_events(raw) if e["type"] in ("response.completed", "response.incomplete")]
    response = ends[0]["response"] if stream else orjson.loads(raw)
    return [json.loads(item["arguments"]) if item["type"] == "function_call" else item["content"][0]["text"]
            for item in response["output"]]


async def every_route(client, tools: list, stream: bool, max_tokens: int = 500) -> dict:
    """route -> its answer: (content, [arguments]) on /v1 and /api/chat, [text or arguments per block / item] on
    /v1/messages and /v1/responses."""
    return {"v1": await v1_answer(client, tools, stream, max_tokens),
            "ollama": await ollama_answer(client, tools, stream, max_tokens),
            "anthropic": await anthropic_answer(client, tools, stream, max_tokens),
            "responses": await responses_answer(client, tools, stream, max_tokens)}
