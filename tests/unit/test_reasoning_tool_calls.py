"""Unit tests: <tool_call> markup inside the model's reasoning (a mention, or a whole call that </think> later
closes) stays reasoning and is never parsed as a call, on every surface, streamed or not; a call the reasoning runs
into without </think> still ends it, as vLLM's qwen3 reasoning parser reads it."""
import json

import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.reasoning import ReasoningSplitter
from tests.unit.tool_deltas import join_calls

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
MENTION = ("I could emit <tool_call> here, but no.", "The answer.")
INSIDE = (f"Maybe {CALL} then again no", "Answer.")


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    async with fake_gateway(fake) as pair:
        yield pair


def split(text: str, size: int) -> tuple[str, str]:
    splitter = ReasoningSplitter(thinking_open=True)
    pieces = [splitter.push(text[i:i + size]) for i in range(0, len(text), size)] + [splitter.flush()]
    return "".join(r for r, _ in pieces), "".join(c for _, c in pieces)


@pytest.mark.parametrize("size", [1, 3, 7, 1000], ids=["per-char", "3", "7", "whole"])
@pytest.mark.parametrize("case", [MENTION, INSIDE], ids=["mention", "whole-call"])
def test_markup_closed_by_think_end_stays_reasoning(case, size):
    reasoning, answer = case
    assert split(f"{reasoning}</think>\n\n{answer}", size) == (reasoning, answer)


@pytest.mark.parametrize("size", [1, 5, 1000], ids=["per-char", "5", "whole"])
def test_call_without_think_end_ends_reasoning(size):
    assert split(f"Need weather.\n{CALL}", size) == ("Need weather.\n", CALL)


def test_a_brace_no_key_follows_is_a_mention_streamed_as_it_comes():
    # "<tool_call>{...}" in the thinking (prose showing the JSON form) was held as a possible call to </think>: the
    # stream's reasoning stopped there; cut off without </think> it came back as the answer.
    thought = "Calls look like <tool_call>{...}</tool_call> in the output. " + "More thought. " * 5
    splitter = ReasoningSplitter(thinking_open=True)
    held = [splitter.push(thought[i:i + 4]) and splitter.held for i in range(0, len(thought), 4)]
    assert max(held) < 20
    assert split(thought, 4) == (thought, "")
    assert split(thought + "</think>\n\nAnswer.", 4) == (thought, "Answer.")
    assert split('Need it.\n<tool_call>\n{"name": "get_weather", "arguments": {}}', 4) == (
        "Need it.\n", '<tool_call>\n{"name": "get_weather", "arguments": {}}')


def test_bare_tag_at_the_end_stays_reasoning():
    assert split("thinking about <tool_call>", 4) == ("thinking about <tool_call>", "")
    assert split("thinking about <tool_call>\n<func", 4) == ("thinking about <tool_call>\n<func", "")
    assert split("a <tool_call> b", 4) == ("a <tool_call> b", "")


async def chat(client, reply_stream: bool) -> dict:
    """(reasoning, content, tool calls, finish_reason) of one /v1 chat answer, reassembled when streamed."""
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS,
            "stream": reply_stream}
    response = await client.post("/v1/chat/completions", json=body)
    if not reply_stream:
        choice = (await response.json())["choices"][0]
        message = choice["message"]
        return {"reasoning": message["reasoning_content"], "content": message["content"],
                "calls": message.get("tool_calls"), "finish": choice["finish_reason"]}
    out, deltas = {"reasoning": "", "content": "", "calls": None, "finish": None}, []
    for line in (await response.text()).splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                delta = choice["delta"]
                out["reasoning"] += delta.get("reasoning_content") or ""
                out["content"] += delta.get("content") or ""
                deltas += delta.get("tool_calls") or []
                out["calls"] = join_calls(deltas) or None
                out["finish"] = choice["finish_reason"] or out["finish"]
    return out


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("case", [MENTION, INSIDE], ids=["mention", "whole-call"])
async def test_openai_reasoning_keeps_its_markup(stack, case, streamed):
    # Before: the <tool_call> ended the reasoning: a mention put the rest of the reasoning and "</think>" in content;
    # a whole call in the reasoning came back as tool_calls with finish_reason tool_calls and the answer was lost.
    client, fake = stack
    reasoning, answer = case
    fake.script.reply = f"{reasoning}</think>\n\n{answer}"
    out = await chat(client, streamed)
    assert out == {"reasoning": reasoning, "content": answer, "calls": None, "finish": "stop"}


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "stream"])
async def test_openai_call_after_unclosed_reasoning_is_a_call(stack, streamed):
    client, fake = stack
    fake.script.reply = f"Need weather.\n{CALL}"
    out = await chat(client, streamed)
    assert out["reasoning"] == "Need weather.\n" and out["finish"] == "tool_calls"
    assert [c["function"] for c in out["calls"]] == [{"name": "get_weather", "arguments": '{"city":"Paris"}'}]


async def test_ollama_and_anthropic_keep_the_markup_in_thinking(stack):
    client, fake = stack
    reasoning, answer = INSIDE
    fake.script.reply = f"{reasoning}</think>\n\n{answer}"
    ollama = await (await client.post("/api/chat", json={
        "model": "fake-model", "stream": False, "tools": TOOLS,
        "messages": [{"role": "user", "content": "hi"}]})).json()
    assert ollama["message"]["thinking"] == reasoning and ollama["message"]["content"] == answer
    assert "tool_calls" not in ollama["message"] and ollama["done_reason"] == "stop"
    anthropic = await (await client.post("/v1/messages", json={
        "model": "fake-model", "max_tokens": 200, "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "get_weather", "input_schema": TOOLS[0]["function"]["parameters"]}]})).json()
    assert [block["type"] for block in anthropic["content"]] == ["thinking", "text"]
    assert anthropic["content"][0]["thinking"] == reasoning and anthropic["content"][1]["text"] == answer
    assert anthropic["stop_reason"] == "end_turn"
