"""Ollama /api/chat streams each tool call as soon as it is whole (as Ollama's qwen3coder parser returns each call
at its </tool_call>), not all of them at the end; the non-streamed answer carries them all, in order."""
import asyncio

import orjson
import pytest

from gateway.engine import Delta, GenRequest
from gateway.fake_scheduler import FakeServing, build_tokenizer
from gateway.model import ModelCard
from gateway.ollama_request import OllamaPlan
from gateway.ollama_shape import OllamaOutput

HI = [{"role": "user", "content": "Hi"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]


def _call(city: str) -> str:
    return f"<tool_call>\n<function=get_weather>\n<parameter=city>\n{city}\n</parameter>\n</function>\n</tool_call>"


TWO_CALLS = f"Let me check.\n\n{_call('Paris')}\n{_call('Rome')}"


def _function(city: str, index: int) -> dict:
    return {"index": index, "name": "get_weather", "arguments": {"city": city}}


async def test_each_call_streams_in_its_own_object(fake):
    client, servicer = fake
    servicer.script.reply = TWO_CALLS
    response = await client.post("/api/chat", json={"model": "fake-model", "messages": HI, "tools": TOOLS,
                                                     "think": False})
    objects = [orjson.loads(line) for line in (await response.read()).splitlines() if line]
    with_calls = [o["message"]["tool_calls"] for o in objects if "tool_calls" in o["message"]]
    assert [[call["function"] for call in calls] for calls in with_calls] == [[_function("Paris", 0)],
                                                                               [_function("Rome", 1)]]
    assert "".join(o["message"]["content"] for o in objects) == "Let me check."
    assert objects[-1]["done"] is True and "tool_calls" not in objects[-1]["message"]


async def test_not_streamed_answer_has_every_call_in_order(fake):
    client, servicer = fake
    servicer.script.reply = TWO_CALLS
    answer = await (await client.post("/api/chat", json={"model": "fake-model", "messages": HI, "tools": TOOLS,
                                                         "think": False, "stream": False})).json()
    assert answer["message"]["content"] == "Let me check."
    assert [call["function"] for call in answer["message"]["tool_calls"]] == [_function("Paris", 0),
                                                                              _function("Rome", 1)]
    assert len({call["id"] for call in answer["message"]["tool_calls"]}) == 2


@pytest.fixture(scope="module")
def card() -> ModelCard:
    return ModelCard.from_info(asyncio.run(FakeServing(build_tokenizer(), max_context_len=2048).Info(None, None)))


def test_a_call_is_given_once_the_next_one_starts_before_the_output_ends(card):
    """Pushed piece by piece: Paris comes back with the piece that opens Rome's call, long before the end."""
    out = OllamaOutput(OllamaPlan(model="m", gen=GenRequest(req_id="r", prompt_ids=[1], max_tokens=99),
                                  tools=TOOLS), card)
    pieces = [out.push(Delta(0, content=text)) for text in ("Let me check.\n\n", _call("Paris"), "\n<tool_", "call>",
                                                         "\n<function=get_weather>\n<parameter=city>\nRo")]
    assert [p.tool_calls for p in pieces[:3]] == [None, None, None]
    assert [call["function"] for call in pieces[3].tool_calls] == [_function("Paris", 0)]
    assert pieces[4].tool_calls is None
    last = out.push(Delta(0, content="me\n</parameter>\n</function>\n</tool_call>", finish_reason="stop"))
    assert [call["function"] for call in last.tool_calls] == [_function("Rome", 1)] and last.content == ""


def test_a_tool_call_mention_inside_a_value_is_not_cut_there(card):
    """A value that quotes the closing markup: the call is read whole at the end, never cut at the quoted close."""
    value = "see </parameter>\n</function>\n</tool_call> here"
    out = OllamaOutput(OllamaPlan(model="m", gen=GenRequest(req_id="r", prompt_ids=[1], max_tokens=99),
                                  tools=TOOLS), card)
    text = f"<tool_call>\n<function=get_weather>\n<parameter=city>\n{value}\n</parameter>\n</function>\n</tool_call>"
    pieces = [out.push(Delta(0, content=ch)) for ch in text[:-1]]
    pieces.append(out.push(Delta(0, content=text[-1], finish_reason="stop")))
    calls = [call for p in pieces for call in (p.tool_calls or [])]
    assert [call["function"] for call in calls] == [{"index": 0, "name": "get_weather", "arguments": {"city": value}}]


LONG = "mcp__chrome-devtools-mcp__performance_analyze_insight_for_the_current_page"


async def test_a_tool_name_past_64_characters_is_offered_and_called(fake):
    """Ollama sets no length on tool names (MCP clients mint longer ones); it was a 400 'must match ...{1,64}$'."""
    client, servicer = fake
    tools = [{"type": "function", "function": {"name": LONG, "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    servicer.script.reply = _call("Paris").replace("get_weather", LONG)
    answer = await (await client.post("/api/chat", json={"model": "fake-model", "messages": HI, "tools": tools,
                                                         "think": False, "stream": False})).json()
    assert len(LONG) > 64
    assert [call["function"] for call in answer["message"]["tool_calls"]] == [
        {"index": 0, "name": LONG, "arguments": {"city": "Paris"}}]
    assert LONG in servicer.tokenizer.decode(list(servicer.script.requests[0].prompt_token_ids))


async def test_a_tool_name_that_could_break_the_markup_is_still_a_400(fake):
    client, _ = fake
    tools = [{"type": "function", "function": {"name": "get>weather"}}]
    response = await client.post("/api/chat", json={"model": "fake-model", "messages": HI, "tools": tools})
    assert response.status == 400
    assert (await response.json())["error"].startswith("tools[0].function.name 'get>weather' cannot be written")
