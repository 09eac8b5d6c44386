"""A tool whose parameters some JSON Schema draft accepts is served on every route, though they break the draft their
$schema names (or 2020-12, without one): MCP servers generated from OpenAPI 3.0 write draft-04's boolean
exclusiveMinimum under a 2020-12 $schema (Dokploy/mcp#74: 597 tools, every request refused), and others declare
draft-04 with an empty required list. vLLM's and Ollama's servers take tools without checking their schema; they
were OpenAI's 400 "Invalid schema for function ..." here. A schema no draft accepts stays that 400 (fake scheduler)."""
import json

import pytest

TTL = {"type": "integer", "exclusiveMinimum": True, "minimum": 0, "maximum": 9007199254740991}
SCHEMAS = {
    "draft-04 keyword": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                         "properties": {"name": {"type": "string"}, "ttl": TTL}, "required": ["name"]},
    "draft-04 empty required": {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                                "properties": {"name": {"type": "string"}, "ttl": {"type": "integer"}},
                                "required": []},
}
REPLY = ("<tool_call>\n<function=dns-createRecord>\n<parameter=name>\nwww\n</parameter>\n<parameter=ttl>\n300\n"
         "</parameter>\n</function>\n</tool_call>")
USER = [{"role": "user", "content": "add www"}]


def request(path: str, schema: dict) -> dict:
    if path == "/v1/messages":
        return {"model": "fake-model", "max_tokens": 200, "messages": USER, "thinking": {"type": "disabled"},
                "tools": [{"name": "dns-createRecord", "input_schema": schema}]}
    if path == "/v1/responses":
        return {"input": "add www", "tools": [{"type": "function", "name": "dns-createRecord", "parameters": schema}]}
    return {"messages": USER, "tools": [{"type": "function", "function": {"name": "dns-createRecord",
                                                                           "parameters": schema}}]}


def arguments(path: str, answer: dict) -> list:
    if path == "/v1/messages":
        return [block["input"] for block in answer["content"] if block["type"] == "tool_use"]
    if path == "/v1/responses":
        return [json.loads(item["arguments"]) for item in answer["output"] if item["type"] == "function_call"]
    return [json.loads(call["function"]["arguments"]) for call in answer["choices"][0]["message"]["tool_calls"]]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions", "/v1/messages",
                                  "/v1/responses"])
@pytest.mark.parametrize("kind", list(SCHEMAS))
async def test_parameters_another_draft_accepts_are_served(stack, path, kind):
    client, _ = stack
    response = await client.post(path, json=request(path, SCHEMAS[kind]))
    answer = await response.json()
    assert response.status == 200, answer
    assert arguments(path, answer) == [{"name": "www", "ttl": 300}]


async def test_parameters_no_draft_accepts_are_still_refused(stack):
    client, fake = stack
    schema = {"type": "object", "properties": {"ttl": {"type": "integr"}}}
    response = await client.post("/v1/chat/completions", json=request("/v1/chat/completions", schema))
    error = (await response.json())["error"]
    assert response.status == 400 and error["code"] == "invalid_function_parameters", error
    assert fake.script.requests == []
