"""/v1/responses over the fake scheduler: `namespace` tools (Codex CLI's MCP servers and multi_agent_v1 group) are
offered to the model under one flat name each, and calls to them come back with `namespace` and `name` apart."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from tests.unit.test_responses_api import NO_THINK, post, prompt_of, stream

NAMESPACE = {"type": "namespace", "name": "mcp__docs", "description": "Docs MCP server",
             "tools": [{"type": "function", "name": "search", "description": "Search the docs",
                        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}},
                       {"type": "custom", "name": "exec", "format": {"type": "text"}}]}
CALL = "<tool_call>\n<function=mcp__docs__search>\n<parameter=q>\nretry\n</parameter>\n</function>\n</tool_call>"
ITEM = {"type": "function_call", "namespace": "mcp__docs", "name": "search", "arguments": '{"q":"retry"}'}


def call_of(item: dict) -> dict:
    return {key: item[key] for key in ("type", "namespace", "name", "arguments")}


async def test_namespaced_functions_are_offered_and_their_calls_name_the_namespace(stack):
    """Namespace tools were left out of the prompt (the model never saw an MCP tool, and tool_choice required with
    only them was a 400 'needs a non-empty tools list'); a call now comes back as OpenAI returns it and Codex routes
    it: name 'search', namespace 'mcp__docs', streamed and not."""
    client, fake = stack
    fake.script.reply = CALL
    body = {"input": "Find retry docs", "tools": [NAMESPACE], "tool_choice": "required", **NO_THINK}
    status, whole = await post(client, body)
    assert status == 200, whole
    assert [call_of(item) for item in whole["output"]] == [ITEM] and whole["tools"] == [NAMESPACE]
    prompt = prompt_of(fake)
    assert '"name": "mcp__docs__search"' in prompt and '"description": "Search the docs"' in prompt
    # The namespace's custom tool is offered too, under its flat name (test_responses_custom_tools).
    assert '"name": "mcp__docs__exec"' in prompt
    events = await stream(client, body)
    added = next(data["item"] for name, data in events if name == "response.output_item.added")
    done = next(data for name, data in events if name == "response.function_call_arguments.done")
    assert (added["namespace"], added["name"], done["name"]) == ("mcp__docs", "search", "search")
    completed = events[-1][1]["response"]
    assert [call_of(item) for item in completed["output"]] == [ITEM]


async def test_a_namespaced_call_goes_back_into_the_prompt_under_its_flat_name(stack):
    client, fake = stack
    status, body = await post(client, {"tools": [NAMESPACE], **NO_THINK, "input": [
        {"role": "user", "content": "Find retry docs"}, {**ITEM, "call_id": "call_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "found 3 pages"}]})
    assert status == 200, body
    assert ("<function=mcp__docs__search>\n<parameter=q>\nretry\n</parameter>\n</function>" in prompt_of(fake))


async def test_tool_choice_names_a_namespaced_function(stack):
    client, fake = stack
    fake.script.reply = CALL
    status, body = await post(client, {"input": "Find", "tools": [NAMESPACE], **NO_THINK,
                                       "tool_choice": {"type": "function", "namespace": "mcp__docs", "name": "search"}})
    assert status == 200, body
    assert [call_of(item) for item in body["output"]] == [ITEM]


async def test_a_flat_name_the_markup_cannot_carry_is_named(stack):
    client, _ = stack
    bad = {**NAMESPACE, "name": "mcp>docs"}
    status, body = await post(client, {"input": "x", "tools": [bad]})
    assert status == 400 and body["error"]["param"] == "tools[0].tools[0].name", body
    assert "'mcp>docs__search' (namespace and name, as the model is offered it) cannot be written" in \
        body["error"]["message"]


async def test_a_flat_name_past_64_characters_is_served(stack):
    client, _ = stack
    status, body = await post(client, {"input": "x", "tools": [{**NAMESPACE, "name": "mcp__" + "d" * 60}]})
    assert status == 200, body


@pytest.mark.parametrize("tool, param, words", [
    ({"type": "namespace", "tools": []}, "tools[1]", "a namespace tool needs a name and a tools list"),
    ({"type": "namespace", "name": "n", "tools": "x"}, "tools[1]", "a namespace tool needs a name and a tools list"),
    ({"type": "namespace", "name": "n", "tools": [1]}, "tools[1].tools[0]", "tools[1].tools[0] must be an object"),
    ({"type": "namespace", "name": "n", "tools": [{"type": "function"}]}, "tools[1].tools[0].name",
     "tools[1].tools[0].name must be a string"),
], ids=["no name", "tools not a list", "member not an object", "member without name"])
async def test_a_malformed_namespace_is_a_400_naming_it(stack, tool, param, words):
    client, _ = stack
    status, body = await post(client, {"input": "x", "tools": [NAMESPACE, tool]})
    assert status == 400 and body["error"]["param"] == param and words in body["error"]["message"], body


async def test_namespaces_holding_more_than_128_functions_are_served():
    """Codex CLI declares each MCP server as one namespace tool: three servers of 50 tools were the 400 "'tools' holds
    150 items; at most 128 are accepted" for a request of three tools, so Codex with a few MCP servers could not send
    a single request. vLLM flattens namespaces with no cap (and caps no tools list: test_many_tools)."""
    fake = FakeServing(build_tokenizer(), max_context_len=65536)
    servers = [{"type": "namespace", "name": f"mcp__s{j}", "description": "MCP server",
                "tools": [{"type": "function", "name": f"tool_{i}", "parameters": {"type": "object"}}
                          for i in range(50)]} for j in range(3)]
    async with fake_gateway(fake) as (client, _):
        status, whole = await post(client, {"input": "Hi", "tools": servers, **NO_THINK})
        assert status == 200, whole
        assert [item["content"][0]["text"] for item in whole["output"]] == ["Hello world"]
        assert '"name": "mcp__s2__tool_49"' in prompt_of(fake) and whole["tools"] == servers


@pytest.mark.parametrize("tools, error", [
    ([{"type": "web_search"}, {"type": "function", "name": "f", "parameters": {"type": "strng"}}],
     ("tools[1].parameters", "invalid_function_parameters", 'Invalid schema for function \'f\': "strng" is not one of '
      '["array", "boolean", "integer", "null", "number", "object", "string"] (at $.type)')),
    ([NAMESPACE, {"type": "namespace", "name": "ns", "tools": [
        {"type": "function", "name": "a"}, {"type": "function", "name": "b", "parameters": {"type": "strng"}}]}],
     ("tools[1].tools[1].parameters", "invalid_function_parameters", "Invalid schema for function 'ns__b': \"strng\" "
      'is not one of ["array", "boolean", "integer", "null", "number", "object", "string"] (at $.type)')),
], ids=["after-hosted", "in-namespace"])
async def test_errors_name_the_tool_where_it_stands(stack, tools, error):
    """A function's error names it where it stands in the request's tools: hosted tools are left out and namespaces
    flattened on the way to the chat route, whose index (tools[0] for the function after a web_search) named another
    tool or none."""
    client, fake = stack
    response = await client.post("/v1/responses", data=orjson.dumps({"input": "hi", "tools": tools}))
    assert response.status == 400
    assert await response.json() == {"error": {"message": error[2], "type": "invalid_request_error",
                                               "param": error[0], "code": error[1]}}
    assert fake.script.requests == []
