"""Bench helper (the process of bench/gateway_load.py): long chat bodies (100 turns, with tools and tool calls) and
the time the gateway's chat template render and tokenizer encode take on them, in this process."""
import asyncio
import copy
import json
import time

from gateway.fake_scheduler import FakeServing, build_tokenizer
from gateway.model import ModelCard
from gateway.openai import chat_prompt_text

REPS = 10
TOOLS = [{"type": "function", "function": {
    "name": f"tool_{i}", "description": f"Tool number {i}: looks something up and returns it as JSON.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "the city"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14}}, "required": ["city"]}}} for i in range(8)]


def long_chat(num_turns: int, tools: bool) -> dict:
    """A /v1/chat/completions body of a system message and num_turns user / assistant pairs; with tools, every
    fourth assistant turn calls a tool and a tool message answers it."""
    messages = [{"role": "system", "content": "You are a helpful assistant. " * 8}]
    for turn in range(num_turns):
        messages.append({"role": "user", "content": f"Question {turn}: what is the weather in Paris today? " * 3})
        if tools and turn % 4 == 0:
            call_id = f"call_{turn}"
            messages.append({"role": "assistant", "content": None, "tool_calls": [{
                "id": call_id, "type": "function",
                "function": {"name": "tool_1", "arguments": json.dumps({"city": "Paris", "days": 3})}}]})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps({"sky": "sunny"})})
        messages.append({"role": "assistant", "content": f"Answer {turn}: it is sunny in Paris. " * 3})
    messages.append({"role": "user", "content": "And tomorrow?"})
    body = {"model": "fake-model", "messages": messages}
    if tools:
        body["tools"] = TOOLS
    return body


def fake_card() -> ModelCard:
    """The card the gateway builds from the fake scheduler's Info (its tokenizer and the shipped template)."""
    fake = FakeServing(build_tokenizer(), max_context_len=1 << 20)
    return ModelCard.from_info(asyncio.run(fake.Info(None, None)))


def best_ms(fn) -> float:
    """The fastest of REPS calls of fn, in ms (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(REPS):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best


def long_chat_rows() -> list:
    """[{chat, prompt_tokens, render_ms, encode_ms, body}] for a short chat and 100-turn chats without and with
    tools."""
    card = fake_card()
    rows = []
    for name, body in (("1 turn", long_chat(0, False)), ("100 turns", long_chat(100, False)),
                       ("100 turns + tools", long_chat(100, True))):
        text = chat_prompt_text(copy.deepcopy(body), card)
        rows.append({"chat": name, "prompt_tokens": len(card.encode(text)),
                     "render_ms": best_ms(lambda: chat_prompt_text(copy.deepcopy(body), card)),
                     "encode_ms": best_ms(lambda: card.encode(text)), "body": body})
    return rows
