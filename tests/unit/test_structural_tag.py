"""vLLM's response_format {"type": "structural_tag", "structures": [{begin, schema, end}], "triggers": [...]} (its
LegacyStructuralTagResponseFormat, on chat and completions): the text is free, but where a trigger appears one of its
structures follows, its JSON valid for the schema. It was a 400 ("structural_tag" is not one of the types). The
grammar is run by the worker's GrammarBook over the tiny model's tokenizer. structured_outputs.structural_tag, the JSON
text of the same object (as vLLM's protocol writes response_format into it), is the same constraint."""
import json
import os

import orjson
import pytest
from tokenizers import Tokenizer


TINY = os.path.join(os.path.dirname(__file__), "..", "..", "models", "tiny", "tokenizer.json")
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
# vLLM's structured-outputs docs example: a function call tag inside free text.
FUNCTION = {"type": "structural_tag", "triggers": ["<function="],
            "structures": [{"begin": "<function=get_weather>", "schema": CITY, "end": "</function>"}]}
# A trigger that is one added token of the Qwen tokenizer.
TOOL_CALL = {"type": "structural_tag", "triggers": ["<tool_call>"],
             "structures": [{"begin": '<tool_call>\n{"name": "get_weather", "arguments": ', "schema": CITY,
                             "end": "}\n</tool_call>"}]}
CHAT = {"messages": [{"role": "user", "content": "Weather?"}], "max_tokens": 64}



async def _post(client, path: str, body: dict):
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


def _accepts(book, constraint, text: str, eos: int) -> bool:
    grammar = book.start(constraint, [])
    ids = Tokenizer.from_file(TINY).encode(text, add_special_tokens=False).ids + [eos]
    return all(grammar.matcher.consume_token(i) for i in ids)


@pytest.mark.parametrize("path, body, prefix", [
    ("/v1/chat/completions", {**CHAT, "enable_thinking": False}, ""),
    ("/v1/chat/completions", CHAT, "Let me think.\n</think>\n\n"),
    ("/v1/completions", {"prompt": "Weather?", "max_tokens": 64}, ""),
], ids=["chat", "chat-thinking", "completions"])
@pytest.mark.parametrize("text, ok", [
    ("It is sunny.", True),
    ('Checking. <function=get_weather>{"city": "Paris"}</function> Done.', True),
    ('<function=get_weather>{"city": 3}</function>', False),
    ('<function=get_time>{"city": "Paris"}</function>', False),
], ids=["text", "tag-in-text", "wrong-type", "unknown-structure"])
async def test_a_trigger_opens_only_its_structures(grammar_stack, path, body, prefix, text, ok):
    client, fake, book = grammar_stack
    status, answer = await _post(client, path, {**body, "response_format": FUNCTION})
    assert status == 200, answer
    assert _accepts(book, fake.script.requests[-1].constraint, prefix + text, fake.eos_id) is ok


@pytest.mark.parametrize("text, ok", [
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>', True),
    ('<tool_call>\n{"name": "get_weather", "arguments": {"town": "Paris"}}\n</tool_call>', False),
], ids=["valid", "wrong-key"])
async def test_a_special_token_trigger(grammar_stack, text, ok):
    client, fake, book = grammar_stack
    status, answer = await _post(client, "/v1/chat/completions",
                                 {**CHAT, "enable_thinking": False, "response_format": TOOL_CALL})
    assert status == 200, answer
    assert _accepts(book, fake.script.requests[-1].constraint, text, fake.eos_id) is ok


@pytest.mark.parametrize("response_format, extra, param, words", [
    ({**FUNCTION, "triggers": ["<tool"]}, {}, "response_format.structures[0].begin",
     "starts with none of the triggers"),
    ({**FUNCTION, "triggers": []}, {}, "response_format.triggers", "needs non-empty structures and triggers"),
    ({"type": "structural_tag", "format": {"type": "const_string", "value": "x"}}, {}, "response_format.format",
     "structural tag formats are not supported"),
    (FUNCTION, {"guided_regex": "a+"}, "guided_regex", "cannot be combined with response_format"),
], ids=["no-trigger", "no-triggers", "new-format", "with-guided"])
async def test_a_structural_tag_it_cannot_serve_is_a_400(grammar_stack, response_format, extra, param, words):
    client, fake, _ = grammar_stack
    status, answer = await _post(client, "/v1/chat/completions", {**CHAT, "response_format": response_format, **extra})
    assert status == 400 and answer["error"]["param"] == param and words in answer["error"]["message"]
    assert not fake.script.requests


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {**CHAT, "enable_thinking": False}),
    ("/v1/completions", {"prompt": "Weather?", "max_tokens": 64}),
], ids=["chat", "completions"])
@pytest.mark.parametrize("tag", [json.dumps(FUNCTION), FUNCTION], ids=["json-text", "object"])
async def test_structured_outputs_structural_tag_is_the_same_constraint(grammar_stack, path, body, tag):
    client, fake, book = grammar_stack
    status, answer = await _post(client, path, {**body, "structured_outputs": {"structural_tag": tag}})
    assert status == 200, answer
    constraint = fake.script.requests[-1].constraint
    assert _accepts(book, constraint, 'See <function=get_weather>{"city": "Paris"}</function>', fake.eos_id)
    assert not _accepts(book, constraint, '<function=get_weather>{"city": 3}</function>', fake.eos_id)
