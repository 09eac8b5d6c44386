"""Ollama /api/chat takes any tool name (api.ToolFunction.Name is any string; its Qwen3-Coder parser reads a call's
name as <function=([^>]+)>), so MCP tools named as the MCP spec allows (`user-profile/update`, SEP-986) or with
spaces or non-ASCII letters are offered and called; they were a 400 "must match ^[a-zA-Z0-9_.:-]+$". Only a name the
call markup cannot carry is refused: one with '>' (it would end the tag), a line break or control character, or a
space at either end (the markup trims it)."""
import orjson
import pytest

HI = [{"role": "user", "content": "Hi"}]


def _tools(name: str) -> list:
    return [{"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]


def _call(name: str) -> str:
    return f"<tool_call>\n<function={name}>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"


@pytest.mark.parametrize("name", ["user-profile/update", "Create CIFS Share", "météo", "天气", "a.b:c=d"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_any_name_the_markup_carries_is_offered_and_called(fake, name, stream):
    client, servicer = fake
    servicer.script.reply = _call(name)
    response = await client.post("/api/chat", json={"model": "fake-model", "messages": HI, "tools": _tools(name),
                                                     "think": False, "stream": stream})
    assert response.status == 200, await response.text()
    if stream:
        lines = [line for line in (await response.text()).splitlines() if line]
        calls = [c for o in map(orjson.loads, lines) for c in o["message"].get("tool_calls", [])]
    else:
        calls = (await response.json())["message"]["tool_calls"]
    assert [call["function"] for call in calls] == [{"index": 0, "name": name, "arguments": {"city": "Paris"}}]
    prompt = servicer.tokenizer.decode(list(servicer.script.requests[-1].prompt_token_ids))
    assert f'"name": "{name}"' in prompt


@pytest.mark.parametrize("name", ["get>weather", "get\nweather", " get_weather", "get_weather ", "a\x00b"],
                         ids=["angle bracket", "line break", "leading space", "trailing space", "control"])
async def test_a_name_the_markup_cannot_carry_is_a_400(fake, name):
    client, _ = fake
    response = await client.post("/api/chat", json={"model": "fake-model", "messages": HI, "tools": _tools(name)})
    assert response.status == 400
    assert await response.json() == {"error": f"tools[0].function.name {name!r} cannot be written in the model's tool "
                                              f"calls (<function=NAME>): no '>', line break or control character, "
                                              f"and no space at either end"}
