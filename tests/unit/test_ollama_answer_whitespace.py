"""Ollama's answer after the thinking starts at its first non-blank character: its Qwen3.5 parser (Qwen3.8's, as
model/parsers/qwen38_test.go runs it) splits at </think> with the text after it trimmed of every leading
unicode.IsSpace character, and goes on eating blanks in the chunks that follow until one holds more
(ollama/ollama model/parsers/parsers.go splitAtTag, model/parsers/qwen35.go eatLeadingWhitespaceAndTransitionTo;
model/parsers/qwen35_test.go TestQwen35ParserStreamingEatsWhitespaceAfterThinkClose: "Reasoning</think>", "\\n \\t",
"The final answer." give the content "The final answer."); the generic parser of a raw prompt does the same
(thinking/parser.go, thinkingState_ThinkingDoneEatingWhitespace). Here only newlines were dropped: " \\tThe final
answer.". An answer that starts without thinking (think false, a prefilled assistant message) keeps its blanks, as
the parser starts in the content there (TestQwen35ParserAssistantPrefillStartsInContent)."""
import orjson
import pytest

USER = [{"role": "user", "content": "hi"}]


def _lines(raw: bytes) -> list:
    return [orjson.loads(line) for line in raw.splitlines() if line.strip()]


async def _answer(client, path: str, body: dict, stream: bool) -> tuple:
    """(thinking, content) of an /api/chat or /api/generate answer, joined when streamed."""
    response = await client.post(path, json={"model": "fake-model", "stream": stream, **body})
    assert response.status == 200, await response.text()
    objs = _lines(await response.read())
    if path == "/api/chat":
        return ("".join(o["message"].get("thinking", "") for o in objs),
                "".join(o["message"]["content"] for o in objs))
    return "".join(o.get("thinking", "") for o in objs), "".join(o["response"] for o in objs)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("path, body", [("/api/chat", {"messages": USER}), ("/api/generate", {"prompt": "hi"}),
                                        ("/api/generate", {"prompt": "hi <think>", "raw": True, "think": True})],
                         ids=["chat", "generate", "raw"])
@pytest.mark.parametrize("reply, expected", [
    # Before: " \tThe final answer.", " \u00a0The answer.\n x" and " \t ".
    ("Reasoning</think>\n \tThe final answer.", ("Reasoning", "The final answer.")),
    ("Reasoning</think> \u00a0The answer.\n x", ("Reasoning", "The answer.\n x")),
    ("Reasoning</think>\n\n \t ", ("Reasoning", "")),
], ids=["tab-and-space", "nbsp-then-inner-blanks-kept", "blanks-only"])
async def test_the_answer_after_the_thinking_starts_at_its_first_non_blank(stack, path, body, reply, expected,
                                                                            stream):
    client, fake = stack
    fake.script.reply = reply
    assert await _answer(client, path, body, stream) == expected


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_answer_without_thinking_keeps_its_leading_blanks(stack, stream):
    client, fake = stack
    fake.script.reply = " \tPlain answer."
    assert await _answer(client, "/api/chat", {"messages": USER, "think": False}, stream) == ("", " \tPlain answer.")
    fake.script.reply = " and continued"
    prefilled = USER + [{"role": "assistant", "content": "Prefilled response start"}]
    assert await _answer(client, "/api/chat", {"messages": prefilled}, stream) == ("", " and continued")
