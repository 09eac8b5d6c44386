"""Gateway over the fake scheduler: tool search as Claude Code runs it over a custom ANTHROPIC_BASE_URL. Its tools may
be marked defer_loading, and its ToolSearch tool answers with tool_reference blocks inside a tool_result; Anthropic
expands each reference into the tool's definition. Here every tool is offered in the prompt and a reference reads
as the definition it names (it was a 400 'content blocks of type 'tool_reference' are not supported here')."""
import json

import pytest

from tests.unit.anthropic_sse import accumulate, parse_events
from tests.unit.test_anthropic_errors import BAD_MESSAGES, expect_error
from tests.unit.test_anthropic_messages import BASE, prompt_of

SEARCH = {"name": "ToolSearch", "description": "Find tools", "input_schema": {
    "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}
ISSUE_SCHEMA = {"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]}
ISSUE = {"name": "mcp__github__get_issue", "description": "Read an issue", "input_schema": ISSUE_SCHEMA,
         "defer_loading": True}
DEFINITION = json.dumps({"type": "function", "function": {"name": "mcp__github__get_issue",
                                                          "description": "Read an issue", "parameters": ISSUE_SCHEMA}},
                        ensure_ascii=False)
CALL = ("<tool_call>\n<function=mcp__github__get_issue>\n<parameter=number>\n7\n</parameter>\n</function>\n"
        "</tool_call>")


def searched(*references: dict) -> list:
    return [{"role": "user", "content": "Read issue 7"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "ToolSearch",
                                               "input": {"query": "github issue"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": [{"type": "text", "text": "Found:"}, *references]}]}]


async def test_a_tool_reference_reads_as_the_tool_definition_and_the_tool_is_called(stack):
    client, fake = stack
    fake.script.reply = CALL
    body = {**BASE, "tools": [SEARCH, ISSUE],
            "messages": searched({"type": "tool_reference", "tool_name": "mcp__github__get_issue"})}
    response = await client.post("/v1/messages", json=body)
    assert response.status == 200, await response.text()
    message = await response.json()
    prompt = prompt_of(fake)
    assert f"<tool_response>\nFound:\n{DEFINITION}\n</tool_response>" in prompt
    # The deferred tool is offered in the system prompt's tool list too, so its call reads back.
    assert prompt.count('"name": "mcp__github__get_issue"') == 2
    assert [(b["type"], b.get("name"), b.get("input")) for b in message["content"]] == [
        ("tool_use", "mcp__github__get_issue", {"number": 7})]
    assert message["stop_reason"] == "tool_use"
    streamed = accumulate(parse_events(await (await client.post("/v1/messages",
                                                               json={**body, "stream": True})).read()))
    assert [(b["type"], b.get("input")) for b in streamed["content"]] == [("tool_use", {"number": 7})]
    counted = await (await client.post("/v1/messages/count_tokens", json=body)).json()
    assert counted == {"input_tokens": message["usage"]["input_tokens"]}


@pytest.mark.parametrize("reference, fragment", [
    ({"type": "tool_reference", "tool_name": "mcp__github__nope"},
     "messages.2.content.0.content.1.tool_name: tool reference 'mcp__github__nope' names no tool in tools"),
    ({"type": "tool_reference"}, "messages.2.content.0.content.1.tool_name: Field required"),
    ({"type": "tool_reference", "tool_name": 5}, "messages.2.content.0.content.1.tool_name: Field required (a string)"),
], ids=["unknown tool", "no name", "not a string"])
async def test_a_tool_reference_naming_no_tool_is_a_400(stack, reference, fragment):
    client, fake = stack
    body = {**BASE, "tools": [SEARCH, ISSUE], "messages": searched(reference)}
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        await expect_error(await client.post(path, json=body), 400, BAD_MESSAGES, fragment)
    assert fake.script.requests == []


async def test_a_tool_reference_to_a_tool_without_input_schema_is_a_400(stack):
    # The reference was expanded before the tools were checked: a 500 "internal error: KeyError('input_schema')".
    client, fake = stack
    body = {**BASE, "tools": [SEARCH, {"name": "mcp__github__get_issue", "defer_loading": True}],
            "messages": searched({"type": "tool_reference", "tool_name": "mcp__github__get_issue"})}
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        response = await client.post(path, json=body)
        await expect_error(response, 400, BAD_MESSAGES, "tools.1.input_schema: Field required")
    assert fake.script.requests == []
