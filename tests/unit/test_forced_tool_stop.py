"""A forced tool call (tool_choice required / named, Anthropic any / tool) is whole whatever the stop strings: the
grammar makes the turn the calls alone, and a stop string met inside the call's markup cut it. Measured on the live
stack: tool_choice "required" with "stop": ["\\n"] (or "</parameter>", "<tool_call>", or a word of the function's name)
answered an empty message, finish_reason "stop", stop_reason "\\n", and no tool_calls, streamed or not (fake
scheduler here)."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from tests.unit.tool_deltas import chunk_calls

TOKENIZER = build_tokenizer()
PARAMS = {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": PARAMS}}]
CALL = "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>"
STOPS = [["\n"], ["</parameter>"], ["weather"], ["Paris"]]
CHOICES = ["required", {"type": "function", "function": {"name": "get_weather"}}]


@pytest.fixture
async def stack():
    fake = FakeServing(TOKENIZER, max_context_len=4096)
    fake.script.reply = CALL
    async with fake_gateway(fake) as pair:
        yield pair


def _body(stop: list, choice) -> dict:
    return {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS, "tool_choice": choice,
            "stop": stop, "enable_thinking": False}


@pytest.mark.parametrize("choice", CHOICES)
@pytest.mark.parametrize("stop", STOPS)
async def test_a_forced_call_is_whole_whatever_the_stop_strings(stack, stop, choice):
    client, _ = stack
    answer = orjson.loads(await (await client.post("/v1/chat/completions", json=_body(stop, choice))).read())
    named = isinstance(choice, dict)
    choice = answer["choices"][0]
    # A named tool_choice's call finishes "stop", as OpenAI and vLLM report it; "required" finishes "tool_calls".
    assert choice["finish_reason"] == ("stop" if named else "tool_calls") and choice["stop_reason"] is None
    assert choice["message"]["content"] is None
    assert [c["function"] for c in choice["message"]["tool_calls"]] == [
        {"name": "get_weather", "arguments": '{"location":"Paris"}'}]


@pytest.mark.parametrize("stop", STOPS)
async def test_a_forced_call_streamed_is_whole_whatever_the_stop_strings(stack, stop):
    client, _ = stack
    raw = (await (await client.post("/v1/chat/completions", json={**_body(stop, "required"), "stream": True})).read())
    chunks = [orjson.loads(line[6:]) for line in raw.decode().split("\n\n") if line.startswith("data: {")]
    calls = chunk_calls(chunks)
    assert [c["function"] for c in calls] == [{"name": "get_weather", "arguments": '{"location":"Paris"}'}]
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "tool_calls"


async def test_anthropic_tool_choice_any_with_stop_sequences_gives_the_tool_use(stack):
    client, _ = stack
    body = {"model": "fake-model", "max_tokens": 200, "messages": [{"role": "user", "content": "Weather?"}],
            "tools": [{"name": "get_weather", "input_schema": PARAMS}], "tool_choice": {"type": "any"},
            "stop_sequences": ["\n"]}
    answer = orjson.loads(await (await client.post("/v1/messages", json=body)).read())
    assert answer["stop_reason"] == "tool_use" and answer["stop_sequence"] is None
    assert [(b["type"], b["name"], b["input"]) for b in answer["content"]] == [
        ("tool_use", "get_weather", {"location": "Paris"})]


async def test_stop_strings_still_apply_to_an_unforced_answer(stack):
    client, _ = stack
    answer = orjson.loads(await (await client.post("/v1/chat/completions", json=_body(["</parameter>"], "auto"))).read())
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == "</parameter>"
    # The stop string cut the call: it is the cut call a stream sends, its arguments unclosed (test_tool_stop_cut).
    assert [c["function"]["arguments"] for c in choice["message"]["tool_calls"]] == ['{"location":"Paris']
