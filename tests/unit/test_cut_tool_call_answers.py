"""A tool call max_tokens cuts, on /v1/messages and /v1/responses with tool_choice auto: its markup is never answer
text. Those APIs carry calls as tool_use blocks and function_call items, never as markup in a text block or an
output_text part (Anthropic's tool use docs: a response cut at max_tokens "contains an incomplete tool use block";
the Responses API's function_call items), and a forced call cut so already left out its markup
(test_forced_tool_cut: "no markup as text"); a stream has sent a call begun (tool_stream) and only that. Before, the
whole answer to a call cut inside its argument, and the stream's to one cut before its first parameter, was a text
block or message '<tool_call>\\n<function=get_weather>\\n...' that Claude Code and Codex show and replay as the
assistant's words. A call begun is the same block or item in the whole answer as in the stream (test_cut_stream_whole),
its input the members the partial JSON completed (here none)."""
import orjson
import pytest

from gateway.fake_scheduler import build_tokenizer
from tests.unit.anthropic_sse import accumulate, parse_events
from tests.unit.test_responses_api import stream as responses_stream

TOKENIZER = build_tokenizer()
OPEN = "<tool_call>\n<function=get_weather>\n"
# Cut before the call's first parameter (not begun: no block streamed) and inside its argument (begun).
CUTS = {"before_its_parameter": OPEN, "inside_its_argument": OPEN + "<parameter=city>\nPa"}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _setup(fake, cut: str) -> int:
    fake.script.reply = "Let me look. " + CUTS[cut] + "ris\n</parameter>\n</function>\n</tool_call>"
    return len(TOKENIZER.encode("Let me look. " + CUTS[cut]).ids)


@pytest.mark.parametrize("cut", CUTS)
async def test_messages_answer_no_markup_for_a_cut_call(stack, cut):
    client, fake = stack
    body = {"model": "fake-model", "max_tokens": _setup(fake, cut), "thinking": {"type": "disabled"},
            "messages": [{"role": "user", "content": "Weather?"}],
            "tools": [{"name": "get_weather", "input_schema": SCHEMA}]}
    whole = orjson.loads(await (await client.post("/v1/messages", data=orjson.dumps(body))).read())
    streamed = accumulate(parse_events(await (await client.post(
        "/v1/messages", data=orjson.dumps({**body, "stream": True}))).read()))
    assert whole["stop_reason"] == streamed["stop_reason"] == "max_tokens"
    assert whole["content"][0] == {"type": "text", "text": "Let me look."}
    cut_blocks = [(block["type"], block["name"], block["input"]) for block in whole["content"][1:]]
    assert cut_blocks == ([] if cut == "before_its_parameter" else [("tool_use", "get_weather", {})])
    assert streamed["content"][0] == {"type": "text", "text": "Let me look."}
    # Streamed, a call begun stays the tool_use block sent, its input as far as it was written.
    rest = [(block["type"], block["name"], block["input"][:11]) for block in streamed["content"][1:]]
    assert rest == ([] if cut == "before_its_parameter" else [("tool_use", "get_weather", '{"city":"Pa')])


@pytest.mark.parametrize("cut", CUTS)
async def test_responses_answer_no_markup_for_a_cut_call(stack, cut):
    client, fake = stack
    body = {"model": "fake-model", "max_output_tokens": _setup(fake, cut), "input": "Weather?",
            "reasoning": {"effort": "none"}, "tools": [{"type": "function", "name": "get_weather", "parameters": SCHEMA}]}
    whole = orjson.loads(await (await client.post("/v1/responses", data=orjson.dumps(body))).read())
    final = (await responses_stream(client, body))[-1][1]["response"]
    for response in (whole, final):
        assert (response["status"], response["incomplete_details"]) == ("incomplete", {"reason": "max_output_tokens"})
        texts = [part["text"] for item in response["output"] if item["type"] == "message" for part in item["content"]]
        assert texts == ["Let me look."]
    for response in (whole, final):
        calls = [(item["name"], item["arguments"][:11], item["status"]) for item in response["output"][1:]]
        assert calls == ([] if cut == "before_its_parameter" else [("get_weather", '{"city":"Pa', "incomplete")])
