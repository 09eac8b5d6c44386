"""Anthropic /v1/messages (fake scheduler): tool names as Anthropic takes them, up to 128 characters
('tools.N.custom.name: String should match pattern ^[a-zA-Z0-9_-]{1,128}$'), so Claude Code's MCP tools
(mcp__<server>__<tool>) past OpenAI's 64 are served; /v1 keeps OpenAI's 64."""
import orjson
import pytest

from tests.unit.anthropic_sse import accumulate, parse_events

USER = [{"role": "user", "content": "Hi"}]
BASE = {"model": "fake-model", "max_tokens": 200, "messages": USER, "thinking": {"type": "disabled"}}
LONG = "mcp__claude_ai_Atlassian_Rovo__" + "getConfluencePageFooterCommentsWithReplies" + "_x" * 20   # 113 characters
SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
REPLY = f"<tool_call>\n<function={LONG}>\n<parameter=id>\n42\n</parameter>\n</function>\n</tool_call>"


async def test_a_tool_name_up_to_128_characters_is_served_and_called(stack):
    client, fake = stack
    assert 64 < len(LONG) <= 128
    body = {**BASE, "tools": [{"name": LONG, "input_schema": SCHEMA}]}
    response = await client.post("/v1/messages", data=orjson.dumps(body))
    message = orjson.loads(await response.read())
    assert response.status == 200, message
    assert [(block["type"], block["name"], block["input"]) for block in message["content"]] == \
        [("tool_use", LONG, {"id": "42"})]
    assert message["stop_reason"] == "tool_use"
    response = await client.post("/v1/messages", data=orjson.dumps({**body, "stream": True}))
    streamed = accumulate(parse_events(await response.read()))
    assert [(block["type"], block["name"]) for block in streamed["content"]] == [("tool_use", LONG)]
    response = await client.post("/v1/messages/count_tokens", data=orjson.dumps(body))
    assert response.status == 200 and (await response.json())["input_tokens"] > 0


@pytest.mark.parametrize("name, fragment", [
    ("x" * 129, "tools.0.name: 'xxx"),
    ("get weather", "tools.0.name: 'get weather'"),
], ids=["129-characters", "space"])
async def test_other_tool_names_are_anthropics_400(stack, name, fragment):
    client, fake = stack
    body = {**BASE, "tools": [{"name": name, "input_schema": SCHEMA}]}
    response = await client.post("/v1/messages", data=orjson.dumps(body))
    error = orjson.loads(await response.read())
    assert response.status == 400 and error["type"] == "error"
    message = error["error"]["message"]
    assert error["error"]["type"] == "invalid_request_error" and message.startswith(fragment), error
    assert message.endswith(" does not match '^[a-zA-Z0-9_.:-]{1,128}$'"), error
    assert fake.script.requests == []


async def test_v1_keeps_openais_64(stack):
    client, fake = stack
    tools = [{"type": "function", "function": {"name": LONG, "parameters": SCHEMA}}]
    response = await client.post("/v1/chat/completions", data=orjson.dumps({"messages": USER, "tools": tools}))
    error = orjson.loads(await response.read())
    assert response.status == 400 and error["error"]["param"] == "tools[0].function.name"
