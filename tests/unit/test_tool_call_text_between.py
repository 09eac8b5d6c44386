"""Answer text after a tool call's end where the whole reading wanted a closer or a call, on every chat route,
streamed or not. Between two calls, the second ending the output: each call is read at its own </tool_call> and the
text is answer text; the reading that ends the output came first, so call A's value ran through call B's markup
({"city": "A\\n</parameter>\\n</function>\\n</tool_call>\\nand ..."}): one garbled call and the second lost. Ollama's
parser ends a call at its first </tool_call> and returns the text between as content (model/parsers/qwen3coder.go);
Qwen3 models write "Now the second one:" between calls."""
import pytest

from tests.unit.tool_routes import every_route

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]


def _call(city: str) -> str:
    return f"<tool_call>\n<function=get_weather>\n<parameter=city>\n{city}\n</parameter>\n</function>\n</tool_call>"


BETWEEN = {"word-line": ("\nand\n", "and"), "inline": ("\nThen ", "Then"),
           "sentence": ("\n\nNow the second one:\n\n", "Now the second one:"), "same-line": (" and ", "and")}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("between", BETWEEN, ids=BETWEEN.keys())
async def test_each_call_and_the_text_between(stack, between, stream):
    client, fake = stack
    written, text = BETWEEN[between]
    fake.script.reply = _call("Paris") + written + _call("Rome")
    calls = [{"city": "Paris"}, {"city": "Rome"}]
    ordered = [calls[0], text, calls[1]]
    assert await every_route(client, TOOLS, stream) == {"v1": (text, calls), "ollama": (text, calls),
                                                        "anthropic": ordered, "responses": ordered}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_value_quoting_the_closing_tags_goes_on(stack, stream):
    """Text after quoted closing tags that no call follows is still the value's (the reading that ends the output)."""
    client, fake = stack
    value = "A\n</parameter>\n</function>\n</tool_call>\nmore"
    fake.script.reply = _call(value)
    assert (await every_route(client, TOOLS, stream))["v1"] == (None if not stream else "", [{"city": value}])


# A call whose </tool_call> the model left out, writing answer text after its </function> (or garbling the closer).
NO_CLOSE = {"sentence": ("\nDone.", "Done."), "paragraph": ("\n\nI asked for the weather.", "I asked for the weather."),
            "then-call": ("\nNext:\n" + _call("Rome"), "Next:")}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("after", NO_CLOSE, ids=NO_CLOSE.keys())
async def test_text_after_a_function_close_ends_the_call(stack, after, stream):
    """'</function>' then answer text: the call ends there, as vLLM's qwen3_coder ends the function at its structural
    </function> (_scan_to_structural_function_end). It was no call (the markup came back as content), and a stream
    sent the value as 'Paris\\n</parameter>'."""
    client, fake = stack
    written, text = NO_CLOSE[after]
    fake.script.reply = _call("Paris").removesuffix("\n</tool_call>") + written
    calls = [{"city": "Paris"}] + [{"city": "Rome"}] * ("Rome" in written)
    ordered = [calls[0], text] + calls[1:]
    assert await every_route(client, TOOLS, stream) == {"v1": (text, calls), "ollama": (text, calls),
                                                        "anthropic": ordered, "responses": ordered}


async def test_a_value_quoting_a_function_close_and_text_goes_on(stack):
    """Text after a quoted </function> that the value's own </parameter> follows is the value's."""
    client, fake = stack
    value = "A\n</parameter>\n</function>\nmore"
    fake.script.reply = _call(value)
    assert (await every_route(client, TOOLS, False))["v1"] == (None, [{"city": value}])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_max_tokens_in_the_call_after_the_text_keeps_the_first(stack, stream):
    """max_tokens cut the second call: the first, whole before the text, is still a call, as where no text lies
    between (the stream hands each call out once the next begins, ToolCallFilter.take_ready). It was lost on every
    route: the whole answer all text, a stream's first call left cut as '{"city":"Paris'."""
    client, fake = stack
    fake.script.reply = _call("Paris") + "\nNow the second one:\n" + _call("Rome")
    cut = len(fake.tokenizer.encode(fake.script.reply).ids) - 8
    answers = await every_route(client, TOOLS, stream, max_tokens=cut)
    assert answers["v1"][1] == [{"city": "Paris"}] and answers["v1"][0].startswith("Now the second one:\n<tool_call>")
    assert answers["ollama"][1] == [{"city": "Paris"}]
    assert answers["anthropic"][:1] == answers["responses"][:1] == [{"city": "Paris"}]
