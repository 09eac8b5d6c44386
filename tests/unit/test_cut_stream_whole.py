"""An output max_tokens cut inside a tool call or inside its thinking says the same thing streamed and whole, on every
route (the README: "A stream and a whole answer of the same request say the same thing"). A stream cannot take back
what it sent, and it sends a call's arguments as the model writes them (OpenAI, vLLM, Anthropic's input_json_delta),
so the whole answer carries the cut call too, as the references do: OpenAI chat a tool call whose arguments are the
JSON written so far with finish_reason "length" (the same unterminated JSON streamed or not: ai-dynamo/dynamo#13791,
vllm-project/vllm#53269), Anthropic "an incomplete tool use block" with stop_reason max_tokens (docs: handling stop
reasons), its input the members the partial JSON completed as Anthropic's SDKs rebuild it from the stream, the
Responses API a function_call item with status "incomplete". Ollama's /api/chat reads a call only at its
</tool_call>: a cut one is left out, streamed or not. Thinking cut so is all reasoning, no answer text, everywhere.
Before, the whole answers left the cut call out (or gave its markup as /v1 content) while the stream had sent it.
Driven by the fake scheduler, whose script writes the tokens; max_tokens lands the cut inside the call."""
import jiter
import orjson
import pytest

from gateway.fake_scheduler import build_tokenizer
from tests.unit.anthropic_sse import accumulate, parse_events
from tests.unit.tool_deltas import join_calls
from tests.unit.tool_routes import sse_events

TOKENIZER = build_tokenizer()
PARAMS = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
          "required": ["city"]}
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": PARAMS}}
OPEN = "<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n<parameter=city>\n"
CALL = "Let me look.\n" + OPEN + "Paris is a big city\n</parameter>\n</function>\n</tool_call>"
THINK = "I should think about the weather in Paris for a while.</think>\n\nIt is sunny."
# script, max_tokens (the cut inside the call's city, inside the thinking), request fields per route
SCENES = {"auto_call": (CALL, len(TOKENIZER.encode("Let me look.\n" + OPEN + "Paris is").ids), "auto"),
          "required_call": (CALL[len("Let me look.\n"):], len(TOKENIZER.encode(OPEN + "Par").ids), "required"),
          "thinking": (THINK, 6, None)}


def _chat_body(choice, stream, max_tokens):
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "Weather?"}], "max_tokens": max_tokens,
            "stream": stream}
    return {**body, "tools": [TOOL], "tool_choice": choice, "enable_thinking": False} if choice else body


async def chat(client, choice, stream, max_tokens):
    raw = await (await client.post("/v1/chat/completions", json=_chat_body(choice, stream, max_tokens))).read()
    if not stream:
        choice0 = orjson.loads(raw)["choices"][0]
        message = choice0["message"]
        calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
        return choice0["finish_reason"], message["content"] or "", message.get("reasoning_content") or "", calls
    choices = [c["choices"][0] for c in sse_events(raw) if c["choices"]]
    deltas = [c["delta"] for c in choices]
    calls = join_calls([call for d in deltas for call in d.get("tool_calls") or []])
    return (choices[-1]["finish_reason"], "".join(d.get("content") or "" for d in deltas),
            "".join(d.get("reasoning_content") or "" for d in deltas),
            [(c["function"]["name"], c["function"]["arguments"]) for c in calls])


async def messages(client, choice, stream, max_tokens):
    body = {"model": "fake-model", "max_tokens": max_tokens, "stream": stream,
            "messages": [{"role": "user", "content": "Weather?"}]}
    if choice:
        body.update(tools=[{"name": "get_weather", "input_schema": PARAMS}], thinking={"type": "disabled"},
                    tool_choice={"type": choice if choice == "auto" else "any"})
    raw = await (await client.post("/v1/messages", json=body)).read()
    message = accumulate(parse_events(raw)) if stream else orjson.loads(raw)
    blocks = []
    for block in message["content"]:
        value = block.get("text", block.get("thinking", block.get("input")))
        if block["type"] == "tool_use" and isinstance(value, str):
            value = jiter.from_json(value.encode(), partial_mode=True)   # as Anthropic's SDKs rebuild a cut input
        blocks.append((block["type"], block.get("name"), value))
    return message["stop_reason"], blocks


async def responses(client, choice, stream, max_tokens):
    body = {"model": "fake-model", "input": "Weather?", "max_output_tokens": max_tokens, "stream": stream}
    if choice:
        body.update(tools=[{"type": "function", "name": "get_weather", "parameters": PARAMS}], tool_choice=choice,
                    reasoning={"effort": "none"})
    raw = await (await client.post("/v1/responses", json=body)).read()
    response = sse_events(raw)[-1]["response"] if stream else orjson.loads(raw)
    items = [(i["type"], i.get("status"), i.get("arguments", i.get("content") or i.get("summary")))
             for i in response["output"]]
    return response["status"], response["incomplete_details"], items


async def ollama(client, choice, stream, max_tokens):
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "Weather?"}], "stream": stream,
            "options": {"num_predict": max_tokens}}
    if choice:
        body.update(tools=[TOOL], think=False)
    lines = [orjson.loads(line) for line in (await (await client.post("/api/chat", json=body)).read()).splitlines()
             if line.strip()]
    msgs = [line["message"] for line in lines]
    return (lines[-1]["done_reason"], "".join(m["content"] for m in msgs), "".join(m.get("thinking") or ""
            for m in msgs), [c["function"] for m in msgs for c in m.get("tool_calls") or []])


ROUTES = {"chat": chat, "messages": messages, "responses": responses, "ollama": ollama}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("scene", list(SCENES))
async def test_a_cut_answer_says_the_same_streamed_and_whole(stack, scene, route, stream):
    client, fake = stack
    fake.script.reply, max_tokens, choice = SCENES[scene]
    if route == "messages" and choice == "required" or route == "ollama" and choice == "required":
        choice = "auto" if route == "ollama" else choice      # Ollama has no tool_choice
    answer = await ROUTES[route](client, choice, stream, max_tokens)
    other = await ROUTES[route](client, choice, not stream, max_tokens)
    assert answer == other
    assert answer[0] in ("length", "max_tokens", "incomplete")


async def test_the_cut_call_is_the_one_the_stream_sent(stack):
    """What the answers hold: the call written so far, cut (JSON that reads as no whole object), and the cut."""
    client, fake = stack
    fake.script.reply, max_tokens, _ = SCENES["auto_call"]
    finish, content, _, calls = await chat(client, "auto", False, max_tokens)
    assert (finish, content.strip(), [name for name, _ in calls]) == ("length", "Let me look.", ["get_weather"])
    assert calls[0][1].startswith('{"days":3,"city":"Paris') and not calls[0][1].endswith("}")
    stop, blocks = await messages(client, "auto", False, max_tokens)
    assert (stop, blocks[-1]) == ("max_tokens", ("tool_use", "get_weather", {"days": 3}))
    status, details, items = await responses(client, "auto", False, max_tokens)
    assert (status, details, items[-1][:2]) == ("incomplete", {"reason": "max_output_tokens"},
                                                ("function_call", "incomplete"))
    assert items[-1][2] == calls[0][1]
    done, _, _, ollama_calls = await ollama(client, "auto", False, max_tokens)
    assert (done, ollama_calls) == ("length", [])
