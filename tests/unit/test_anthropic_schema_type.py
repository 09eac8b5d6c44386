"""Gateway over the fake scheduler: a tool whose input_schema has no "type" (some MCP servers list their tools so,
and Claude Code forwards their inputSchema as it is) is an object schema, as vLLM's AnthropicTool and Ollama read it;
it was a 400 "tools.0.input_schema.type: Field required" on every request that carried the tool. Another type stays a
400."""
import pytest

from tests.unit.test_anthropic_errors import BAD_MESSAGES, expect_error
from tests.unit.test_anthropic_messages import BASE, prompt_of

UNTYPED = {"properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOL = {"name": "get_weather", "description": "Weather of a city", "input_schema": UNTYPED}
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"


async def test_an_input_schema_without_type_is_an_object_schema(stack):
    client, fake = stack
    fake.script.reply = CALL
    body = {**BASE, "tools": [TOOL]}
    response = await client.post("/v1/messages", json=body)
    assert response.status == 200, await response.text()
    message = await response.json()
    assert [(b["type"], b["name"], b["input"]) for b in message["content"]] == [
        ("tool_use", "get_weather", {"city": "Paris"})]
    assert '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}' in prompt_of(fake)
    counted = await (await client.post("/v1/messages/count_tokens", json=body)).json()
    assert counted == {"input_tokens": message["usage"]["input_tokens"]}
    # A forced call builds its grammar from the same object schema.
    forced = await client.post("/v1/messages", json={**body, "tool_choice": {"type": "tool", "name": "get_weather"}})
    assert forced.status == 200, await forced.text()
    assert (await forced.json())["content"][0]["input"] == {"city": "Paris"}


@pytest.mark.parametrize("schema_type", ["array", "string"])
async def test_another_type_is_still_a_400(stack, schema_type):
    client, fake = stack
    body = {**BASE, "tools": [{**TOOL, "input_schema": {**UNTYPED, "type": schema_type}}]}
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        await expect_error(await client.post(path, json=body), 400, BAD_MESSAGES,
                           'tools.0.input_schema.type: "object" was expected')
    assert fake.script.requests == []


def test_many_unknown_fields_are_one_line(caplog, monkeypatch):
    """A body with 5000 unknown keys wrote 5000 lines, and every new name was kept for good."""
    from gateway import anthropic_schema
    from gateway.once_log import MAX_REMEMBERED, MAX_SHOWN
    monkeypatch.setattr(anthropic_schema._unknown, "seen", set())
    body = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    with caplog.at_level("WARNING", logger="sparkinfer.gateway"):
        anthropic_schema.validate({**body, **{f"k{i}": i for i in range(5000)}}, anthropic_schema.MESSAGES_SCHEMA)
    lines = [r.getMessage() for r in caplog.records if "unknown Anthropic" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("ignoring unknown Anthropic request fields 'k0', 'k1'"), lines
    assert lines[0].endswith(f"and {MAX_REMEMBERED - MAX_SHOWN} more (each name logged once; no further names are "
                             "logged)")
