"""tool_choice auto with a strict tool: the answer is free, but a call follows the tools' schemas, as OpenAI's strict
function calling guarantees ("even in auto mode") and vLLM enforces under VLLM_ENFORCE_STRICT_TOOL_CALLING (its
default since 0.24): a strict tool's call arguments are constrained by the structural tag of the model's tool-call
format. Without a strict tool, auto stays unconstrained. The grammar is run here by the worker's GrammarBook over the
tiny model's tokenizer, whose <tool_call> is one added token."""
import os

import orjson
import pytest
from tokenizers import Tokenizer


TINY = os.path.join(os.path.dirname(__file__), "..", "..", "models", "tiny", "tokenizer.json")
PARAMS = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
          "required": ["city", "days"], "additionalProperties": False}
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n{days}\n" \
       "</parameter>\n</function>\n</tool_call>"


def _tools(strict: bool) -> list:
    return [{"type": "function", "function": {"name": "get_weather", "strict": strict, "parameters": PARAMS}}]



async def _constraint(client, fake, body: dict):
    body = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 64, **body}
    response = await client.post("/v1/chat/completions", data=orjson.dumps(body))
    assert response.status == 200, await response.read()
    return fake.script.requests[-1].constraint


def _accepts(book, constraint, text: str, eos: int) -> bool:
    """Whether the grammar takes `text` (tokenized as the model writes it) and then the end of the turn."""
    grammar = book.start(constraint, [])
    ids = Tokenizer.from_file(TINY).encode(text, add_special_tokens=False).ids + [eos]
    return all(grammar.matcher.consume_token(i) for i in ids)


@pytest.mark.parametrize("thinking", [False, True], ids=["thinking-off", "thinking-on"])
@pytest.mark.parametrize("text, ok", [
    ("It is sunny.", True),
    ("Let me look.\n\n" + CALL.format(days=3), True),
    (CALL.format(days=3) + "\n" + CALL.format(days=4), True),
    (CALL.format(days='"three"'), False),
    (CALL.replace("get_weather", "get_time").format(days=3), False),
    (CALL.format(days=3).replace("<parameter=days>\n3\n</parameter>\n", ""), False),
], ids=["text", "text-then-call", "two-calls", "wrong-type", "unknown-function", "missing-required"])
async def test_a_strict_tools_call_follows_its_schema_under_auto(grammar_stack, thinking, text, ok):
    client, fake, book = grammar_stack
    constraint = await _constraint(client, fake, {"tools": _tools(True), "enable_thinking": thinking})
    assert constraint.kind == "lark"
    prefix = "The user asks.\n</think>\n\n" if thinking else ""
    assert _accepts(book, constraint, prefix + text, fake.eos_id) is ok


async def test_one_call_only_without_parallel_tool_calls(grammar_stack):
    client, fake, book = grammar_stack
    constraint = await _constraint(client, fake, {"tools": _tools(True), "enable_thinking": False,
                                                  "parallel_tool_calls": False})
    assert _accepts(book, constraint, CALL.format(days=3), fake.eos_id)
    assert not _accepts(book, constraint, CALL.format(days=3) + "\n" + CALL.format(days=4), fake.eos_id)


@pytest.mark.parametrize("body", [{"tools": _tools(False)}, {"tools": _tools(True), "tool_choice": "none"}],
                         ids=["not-strict", "tool-choice-none"])
async def test_auto_without_a_strict_tool_is_unconstrained(grammar_stack, body):
    client, fake, _ = grammar_stack
    constraint = await _constraint(client, fake, {**body, "enable_thinking": False})
    assert not constraint.grammar


@pytest.mark.parametrize("path, body", [
    ("/v1/responses", {"input": "Weather in Paris?", "reasoning": {"effort": "none"},
                       "tools": [{"type": "function", "name": "get_weather", "strict": True, "parameters": PARAMS}]}),
    ("/v1/messages", {"model": "fake-model", "max_tokens": 64, "messages": [{"role": "user", "content": "Weather?"}],
                      "thinking": {"type": "disabled"},
                      "tools": [{"name": "get_weather", "strict": True, "input_schema": PARAMS}]}),
    ("/api/v0/chat/completions", {"messages": [{"role": "user", "content": "Weather?"}], "enable_thinking": False,
                                  "tools": _tools(True)}),
], ids=["responses", "messages", "lmstudio"])
async def test_every_chat_api_constrains_a_strict_tools_call(grammar_stack, path, body):
    """The Responses API's function tools and Anthropic's strict tool use ("strict": true beside input_schema) are
    the same promise."""
    client, fake, book = grammar_stack
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200, await response.read()
    constraint = fake.script.requests[-1].constraint
    assert _accepts(book, constraint, CALL.format(days=3), fake.eos_id)
    assert not _accepts(book, constraint, CALL.format(days='"three"'), fake.eos_id)
