"""Ollama /api/chat with a format and tools: a tool whose parameters schema the calls grammar cannot hold (an empty
enum, an unknown type, a $ref to nothing) joins the grammar with its parameters' names and unchecked values, as
Ollama enforces no tool schema (it only renders the tools into the prompt; its grammar is the format's), instead of
the 400 naming that tool's schema, which Ollama never answers. The same tools without a format were served already."""
import orjson
import pytest

HI = [{"role": "user", "content": "hi"}]
BROKEN = {
    "empty enum": {"test": {"type": "string", "description": "test prop", "enum": []}},
    "unknown type": {"test": {"type": "strin"}},
    "missing ref": {"test": {"$ref": "#/$defs/X"}},
}


def tool(name: str, properties: dict, required=("test",)) -> dict:
    return {"type": "function", "function": {"name": name, "description": "d", "parameters": {
        "type": "object", "required": list(required), "properties": properties}}}


@pytest.mark.parametrize("properties", list(BROKEN.values()), ids=list(BROKEN))
async def test_a_tool_schema_the_grammar_cannot_hold_is_left_unchecked(stack, properties):
    client, servicer = stack
    servicer.script.reply = "{}"
    tools = [tool("test", properties), tool("good", {"test": {"type": "string", "enum": ["a", "b"]}})]
    response = await client.post("/api/chat", json={"model": "fake-model", "messages": HI, "stream": False,
                                                    "think": False, "format": "json", "tools": tools})
    assert response.status == 200, await response.text()
    assert orjson.loads(await response.read())["message"]["content"] == "{}"
    grammar = servicer.script.requests[-1].constraint.grammar
    # Both tools can still be called, each with its parameter; the good one keeps its schema.
    assert '"\\n<function=test>\\n"' in grammar and '"\\n<function=good>\\n"' in grammar
    assert grammar.count('"<parameter=test>\\n"') == 2 and '("a" | "b")' in grammar


async def test_a_format_the_grammar_cannot_hold_is_still_refused(stack):
    """The format itself is what Ollama's grammar enforces: one that allows no JSON stays the 400."""
    client, servicer = stack
    response = await client.post("/api/chat", json={
        "model": "fake-model", "messages": HI, "stream": False, "think": False, "tools": [tool("test", {})],
        "format": {"type": "object", "properties": {"a": {"$ref": "#/$defs/X"}}, "required": ["a"]}})
    assert response.status == 400 and not servicer.script.requests
    assert "format" in orjson.loads(await response.read())["error"]
