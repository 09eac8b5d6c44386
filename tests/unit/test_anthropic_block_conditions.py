"""Gateway over the fake scheduler: a content block's type-dependent fields (citations, source) are checked only in a
block that carries them. The schema's if/then ran for every block, which made a long list of plain text blocks four
times as slow to validate (250 000 blocks: 70 s). The tests prove where the check runs, not a time."""
import pytest
from jsonschema import Draft202012Validator

from tests.unit.test_anthropic_errors import BAD_MESSAGES, expect_error
from tests.unit.test_anthropic_messages import BASE, prompt_of

TEXT = {"type": "text", "text": "Hi"}
CALL = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}


_BLOCK_TYPES = {"text", "thinking", "tool_use", "tool_result"}


def _no_block_conditions(original):
    def if_(validator, schema_if, instance, schema):
        if isinstance(instance, dict) and instance.get("type") in _BLOCK_TYPES:
            raise AssertionError(f"the block conditions were evaluated for {instance!r}, without citations or source")
        yield from original(validator, schema_if, instance, schema)
    return if_


@pytest.mark.parametrize("messages, rendered", [
    ([{"role": "user", "content": [TEXT] * 500}], "<|im_start|>user\n" + "Hi" * 500 + "<|im_end|>"),
    ([{"role": "user", "content": [TEXT]},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, CALL]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [TEXT] * 50}, TEXT]}],
     "<tool_response>\n" + "Hi\n" * 50 + "</tool_response>"),
], ids=["text blocks", "a tool loop"])
async def test_blocks_without_citations_or_source_skip_the_type_conditions(stack, monkeypatch, messages, rendered):
    client, fake = stack
    original = Draft202012Validator.VALIDATORS["if"]
    monkeypatch.setitem(Draft202012Validator.VALIDATORS, "if", _no_block_conditions(original))
    body = {**BASE, "tools": [{"name": "f", "input_schema": {"type": "object"}}], "messages": messages}
    response = await client.post("/v1/messages", json=body)
    assert response.status == 200, await response.text()
    assert rendered in prompt_of(fake)


@pytest.mark.parametrize("block, fragment", [
    ({**TEXT, "citations": {"enabled": True}},
     'messages.0.content.0.citations: {"enabled": true} is not of type "array", "null"'),
    ({"type": "image", "source": "https://example.org/a.png"},
     'messages.0.content.0.source: "https://example.org/a.png" is not of type "object", "null"'),
    ({"type": "search_result", "source": {"url": "x"}, "title": "t", "content": [TEXT]},
     'messages.0.content.0.source: {"url": "x"} is not of type "string"'),
    ({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "d"}, "citations": [1]},
     'messages.0.content.0.citations: [1] is not of type "object", "null"'),
], ids=["text citations object", "image source string", "search result source object", "document citations list"])
async def test_a_block_that_carries_them_still_has_them_checked(stack, block, fragment):
    client, fake = stack
    body = {**BASE, "messages": [{"role": "user", "content": [block, TEXT]}]}
    await expect_error(await client.post("/v1/messages", json=body), 400, BAD_MESSAGES, fragment)
    assert fake.script.requests == []
