"""Ollama thinking without the <think> markup's whitespace (fake scheduler), as Ollama's Qwen3.5 parser gives it
(model/parsers/qwen35.go): the newline before </think>, or before a tool call that ends the thinking, is not
thinking; streamed, no piece of it is sent, and the pieces join to the non-streamed text."""
import orjson
import pytest

from gateway.ollama_thinking import ThinkingTrim

HI = [{"role": "user", "content": "Hi"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"


def _objects(raw: bytes) -> list:
    return [orjson.loads(line) for line in raw.splitlines() if line]


def _thinking(o: dict) -> str:
    return (o.get("message") or o).get("thinking", "")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("path, body", [("/api/chat", {"messages": HI}), ("/api/generate", {"prompt": "Hi"})],
                         ids=["chat", "generate"])
async def test_the_newline_before_the_closing_tag_is_not_thinking(fake, path, body, stream):
    client, servicer = fake
    servicer.script.reply = "Plan:\n\n1. greet\n  \n</think>\n\nHello world"
    response = await client.post(path, json={"model": "fake-model", "stream": stream, **body})
    objects = _objects(await response.read())
    assert "".join(_thinking(o) for o in objects) == "Plan:\n\n1. greet"
    # The blank line inside the thinking is thinking; nothing after its last word is sent.
    assert all(_thinking(o).strip() or not _thinking(o) for o in objects)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_call_that_ends_the_thinking_leaves_no_newline_in_it(fake, stream):
    client, servicer = fake
    servicer.script.reply = f"let me call\n{CALL}"
    response = await client.post("/api/chat", json={"model": "fake-model", "messages": HI, "tools": TOOLS,
                                                     "stream": stream})
    objects = _objects(await response.read())
    assert "".join(_thinking(o) for o in objects) == "let me call"
    calls = [call for o in objects for call in o["message"].get("tool_calls", [])]
    assert [call["function"]["arguments"] for call in calls] == [{"city": "Paris"}]


async def test_a_repeated_opening_tag_leaves_no_leading_newline(fake):
    client, servicer = fake
    servicer.script.reply = "<think>\nhmm\n</think>\n\nhi"
    answer = await (await client.post("/api/chat", json={"model": "fake-model", "messages": HI,
                                                         "stream": False})).json()
    assert answer["message"] == {"role": "assistant", "content": "hi", "thinking": "hmm"}


def test_trailing_whitespace_is_held_until_more_thinking_comes():
    trim = ThinkingTrim()
    assert [trim.push(text, False) for text in ("\n", "a", " \n", "b\n")] == ["", "a", "", " \nb"]
    assert trim.push("\n", True) == ""


def test_raw_mode_keeps_the_trailing_newline():
    trim = ThinkingTrim(trim_end=False)
    assert [trim.push(text, False) for text in ("\n", "a\n")] + [trim.push("", True)] == ["", "a\n", ""]
