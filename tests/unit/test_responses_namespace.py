"""/v1/responses over the fake scheduler: `namespace` tools (Codex CLI's MCP servers and multi_agent_v1 group) are
offered to the model under one flat name each, and calls to them come back with `namespace` and `name` apart."""
import pytest

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
    assert '"exec"' not in prompt
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


async def test_a_flat_name_past_64_characters_is_named(stack):
    client, _ = stack
    long = {**NAMESPACE, "name": "mcp__" + "d" * 60}
    status, body = await post(client, {"input": "x", "tools": [long]})
    assert status == 400 and body["error"]["param"] == "tools[0].tools[0].name", body
    assert f"'mcp__{'d' * 60}__search'" in body["error"]["message"]


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
