"""A tool's parameters are checked against the JSON Schema drafts once per distinct schema, not on every request:
an agent (Claude Code with a few MCP servers) sends the same few hundred tools with every turn, and each check walks
the meta-schema. The answers are the same either way: a valid schema is served, an invalid one is the 400 naming it,
on the second request as on the first."""
import uuid

from gateway import structured


def tools(count: int, tag: str, bad: bool = False) -> list:
    kind = "strng" if bad else "string"
    return [{"type": "function", "function": {"name": f"tool_{i}", "parameters": {
        "type": "object", "description": f"{tag}-{i}", "properties": {"a": {"type": kind}}}}} for i in range(count)]


async def test_each_schema_is_checked_once(stack, monkeypatch):
    client, fake = stack
    checked = []
    real = structured._any_draft_schema_error
    monkeypatch.setattr(structured, "_any_draft_schema_error", lambda schema: checked.append(schema) or real(schema))
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
            "tools": tools(3, uuid.uuid4().hex)}
    for _ in range(2):
        response = await client.post("/v1/chat/completions", json=body)
        assert response.status == 200, await response.text()
    assert len(checked) == 3
    bad = {**body, "tools": tools(1, uuid.uuid4().hex, bad=True)}
    for _ in range(2):
        response = await client.post("/v1/chat/completions", json=bad)
        error = (await response.json())["error"]
        assert response.status == 400 and error["param"] == "tools[0].function.parameters"
        assert error["message"].startswith("Invalid schema for function 'tool_0': \"strng\" is not one of [") and \
            error["message"].endswith("(at $.properties.a.type)")
    assert len(checked) == 4
