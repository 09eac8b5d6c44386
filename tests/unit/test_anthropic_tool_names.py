"""Tool names (fake scheduler): any name the call markup can carry, on /v1/messages, /v1 and /api/v0 and
/v1/responses, as vLLM and Ollama take them, so Claude Code's MCP tools (mcp__<server>__<tool>) past OpenAI's 64
characters and MCP names with '/' or spaces are served; a name the markup cannot carry is a 400 that says why."""
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


@pytest.mark.parametrize("name", ["x" * 129, "get weather", "user-profile/update", "天气", "f=x"],
                         ids=["129-characters", "space", "slash", "non-ascii", "equals"])
async def test_any_name_the_markup_carries_is_served_on_both_routes(stack, name):
    """vLLM's Anthropic and OpenAI layers (and Ollama) take any tool name; MCP clients mint longer ones and ones with
    '/' (SEP-986) or spaces. Anthropic's own API would refuse these ('^[a-zA-Z0-9_-]{1,128}$'); a drop-in for the
    servers people run it beside does not."""
    client, fake = stack
    fake.script.reply = REPLY.replace(LONG, name)
    body = {**BASE, "tools": [{"name": name, "input_schema": SCHEMA}]}
    message = orjson.loads(await (await client.post("/v1/messages", data=orjson.dumps(body))).read())
    assert [(block["type"], block["name"], block["input"]) for block in message["content"]] == \
        [("tool_use", name, {"id": "42"})], message
    tools = [{"type": "function", "function": {"name": name, "parameters": SCHEMA}}]
    response = await client.post("/v1/chat/completions", data=orjson.dumps({"messages": USER, "tools": tools,
                                                                           "enable_thinking": False}))
    calls = orjson.loads(await response.read())["choices"][0]["message"]["tool_calls"]
    assert [(c["function"]["name"], orjson.loads(c["function"]["arguments"])) for c in calls] == [(name, {"id": "42"})]


@pytest.mark.parametrize("name", ["get>weather", "get\nweather", " get_weather", "a\x00b"],
                         ids=["angle bracket", "line break", "leading space", "control"])
async def test_a_name_the_markup_cannot_carry_is_a_400_on_every_route(stack, name):
    client, fake = stack
    reason = (f"{name!r} cannot be written in the model's tool calls (<function=NAME>): no '>', line break or control "
              f"character, and no space at either end")
    response = await client.post("/v1/messages", data=orjson.dumps(
        {**BASE, "tools": [{"name": name, "input_schema": SCHEMA}]}))
    error = orjson.loads(await response.read())
    assert response.status == 400 and error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].endswith(reason), error
    tools = [{"type": "function", "function": {"name": name, "parameters": SCHEMA}}]
    for path in ("/v1/chat/completions", "/api/v0/chat/completions"):
        response = await client.post(path, data=orjson.dumps({"messages": USER, "tools": tools}))
        error = orjson.loads(await response.read())["error"]
        assert response.status == 400 and error["param"] == "tools[0].function.name"
        assert error["message"] == f"tools[0].function.name {reason}"
    response = await client.post("/v1/responses", data=orjson.dumps(
        {"input": "hi", "tools": [{"type": "function", "name": name, "parameters": SCHEMA}]}))
    error = orjson.loads(await response.read())["error"]
    assert response.status == 400 and reason in error["message"], error
    assert fake.script.requests == []
