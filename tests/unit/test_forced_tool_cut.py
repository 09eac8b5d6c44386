"""A forced tool call (tool_choice required / named, Anthropic any / tool, the Responses API's) cut by max_tokens:
every route keeps the calls the model finished and says the output was cut (finish_reason "length", status
"incomplete" with max_output_tokens, stop_reason "max_tokens"), streamed or not, and the call it was cut inside is the
one a stream sends (tool_stream, as OpenAI, Anthropic and vLLM stream a call cut so), whole answer too: its arguments
as far as they were written, JSON no client reads as a whole call (the Responses API's function_call item
"incomplete", Anthropic's "incomplete tool use block" with the input members completed), no markup as text. vLLM
reports "length" for such a turn (serving.py relabels a required turn "tool_calls" only when the engine stopped).
Through the fake scheduler, which writes the scripted calls whatever the grammar (the real stack's grammar makes the
same markup)."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from tests.unit.anthropic_sse import accumulate, parse_events
from tests.unit.tool_deltas import join_calls

TOKENIZER = build_tokenizer()
PARAMS = {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}
OPEN = "<tool_call>\n<function=get_weather>\n<parameter=location>\n"
FIRST = OPEN + "Paris\n</parameter>\n</function>\n</tool_call>"
REPLY = FIRST + "\n" + OPEN + "London is a big city\n</parameter>\n</function>\n</tool_call>"
# (a) inside the first call's argument; (b) after the whole first call, inside the second's argument.
CUTS = {"inside_the_first": (len(TOKENIZER.encode(OPEN + "Pa").ids), []),
        "inside_the_second": (len(TOKENIZER.encode(FIRST + "\n" + OPEN + "Lon").ids), [{"location": "Paris"}])}
# The arguments of the call each cut is inside, of which a stream sends the part written.
CUT_CALL = {"inside_the_first": '{"location":"Paris"}', "inside_the_second": '{"location":"London is a big city"}'}
FORCED = ["required", "named"]


@pytest.fixture
async def stack():
    fake = FakeServing(TOKENIZER, max_context_len=4096)
    fake.script.reply = REPLY
    async with fake_gateway(fake) as pair:
        yield pair


def _data(raw: bytes) -> list:
    return [orjson.loads(line[6:]) for line in raw.decode().split("\n") if line.startswith("data: {")]


async def _chat(client, forced: str, max_tokens: int, stream: bool) -> tuple:
    """(finish_reason, content text, [arguments])."""
    choice = "required" if forced == "required" else {"type": "function", "function": {"name": "get_weather"}}
    body = {"messages": [{"role": "user", "content": "Weather?"}], "max_tokens": max_tokens, "stream": stream,
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": PARAMS}}],
            "tool_choice": choice, "enable_thinking": False}
    raw = await (await client.post("/v1/chat/completions", json=body)).read()
    if not stream:
        answer = orjson.loads(raw)["choices"][0]
        message = answer["message"]
        calls = [c["function"]["arguments"] for c in message.get("tool_calls") or []]
        return answer["finish_reason"], message["content"] or "", [_loads(a) for a in calls]
    choices = [chunk["choices"][0] for chunk in _data(raw) if chunk["choices"]]
    text = "".join(c["delta"].get("content") or "" for c in choices)
    calls = [call["function"]["arguments"] for call in join_calls(
        [call for c in choices for call in c["delta"].get("tool_calls") or []])]
    return choices[-1]["finish_reason"], text, [_loads(a) for a in calls]


def _loads(arguments: str):
    """The arguments' JSON, or their text where they were cut."""
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments


def _cut_part(cut: str, arguments) -> bool:
    """Whether arguments are the cut call's, as far as the stream sent them."""
    return isinstance(arguments, str) and arguments.startswith('{"location":"') and CUT_CALL[cut].startswith(
        arguments) and arguments != CUT_CALL[cut]


async def _responses(client, forced: str, max_tokens: int, stream: bool) -> tuple:
    """(status, incomplete_details, [(item type, arguments)]) of the response (streamed: its last event's)."""
    choice = "required" if forced == "required" else {"type": "function", "name": "get_weather"}
    body = {"input": "Weather?", "tools": [{"type": "function", "name": "get_weather", "parameters": PARAMS}],
            "tool_choice": choice, "max_output_tokens": max_tokens, "reasoning": {"effort": "none"},
            "stream": stream}
    raw = await (await client.post("/v1/responses", json=body)).read()
    response = _data(raw)[-1]["response"] if stream else orjson.loads(raw)
    if stream:
        assert _data(raw)[-1]["type"] == "response.incomplete"
    items = [(item["type"], _loads(item["arguments"]) if item["type"] == "function_call" else item)
             for item in response["output"] if item.get("status") != "incomplete"]
    cut = [item["arguments"] for item in response["output"] if item.get("status") == "incomplete"]
    items += [("cut", arguments) for arguments in cut]
    return response["status"], response["incomplete_details"], items


async def _messages(client, forced: str, max_tokens: int, stream: bool) -> tuple:
    """(stop_reason, [(block type, input)]) of the message (streamed: as Anthropic's SDK rebuilds it)."""
    choice = {"type": "any"} if forced == "required" else {"type": "tool", "name": "get_weather"}
    body = {"model": "fake-model", "max_tokens": max_tokens, "messages": [{"role": "user", "content": "Weather?"}],
            "tools": [{"name": "get_weather", "input_schema": PARAMS}], "tool_choice": choice, "stream": stream}
    raw = await (await client.post("/v1/messages", json=body)).read()
    message = accumulate(parse_events(raw)) if stream else orjson.loads(raw)
    return message["stop_reason"], [(block["type"], block.get("input", block)) for block in message["content"]]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("forced", FORCED)
@pytest.mark.parametrize("cut", list(CUTS))
async def test_chat_keeps_the_whole_calls_and_says_length(stack, cut, forced, stream):
    client, _ = stack
    max_tokens, kept = CUTS[cut]
    finish, text, calls = await _chat(client, forced, max_tokens, stream)
    assert (finish, text, calls[:len(kept)]) == ("length", "", kept)
    assert len(calls) == len(kept) + 1 and _cut_part(cut, calls[-1])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("forced", FORCED)
@pytest.mark.parametrize("cut", list(CUTS))
async def test_responses_keeps_the_whole_calls_and_is_incomplete(stack, cut, forced, stream):
    client, _ = stack
    max_tokens, kept = CUTS[cut]
    status, details, items = await _responses(client, forced, max_tokens, stream)
    assert (status, details) == ("incomplete", {"reason": "max_output_tokens"})
    assert items[:len(kept)] == [("function_call", arguments) for arguments in kept]
    # The cut call's item is "incomplete" with its arguments as far as they were written.
    assert len(items) == len(kept) + 1 and items[-1][0] == "cut" and _cut_part(cut, items[-1][1])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("forced", FORCED)
@pytest.mark.parametrize("cut", list(CUTS))
async def test_messages_keeps_the_whole_tool_uses_and_says_max_tokens(stack, cut, forced, stream):
    client, _ = stack
    max_tokens, kept = CUTS[cut]
    stop, blocks = await _messages(client, forced, max_tokens, stream)
    assert (stop, blocks[:len(kept)]) == ("max_tokens", [("tool_use", args) for args in kept])
    # The cut tool_use block: the stream's input as far as it was written (a partial JSON), the whole message's the
    # members it completed (none: cut inside the only one), as Anthropic's SDKs rebuild the streamed block.
    assert len(blocks) == len(kept) + 1 and blocks[-1][0] == "tool_use"
    assert _cut_part(cut, blocks[-1][1]) if stream else blocks[-1][1] == {}


async def test_the_calls_made_whole_finish_as_calls(stack):
    """The same script with room for both calls: both, and the finish every route gives a turn of calls."""
    client, _ = stack
    both = [{"location": "Paris"}, {"location": "London is a big city"}]
    assert await _chat(client, "required", 400, False) == ("tool_calls", "", both)
    assert await _messages(client, "required", 400, True) == ("tool_use", [("tool_use", a) for a in both])
