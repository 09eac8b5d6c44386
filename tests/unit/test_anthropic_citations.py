"""Gateway over the fake scheduler: Anthropic's citation-enabled blocks. A document's and a search result's
`citations` are {"enabled": bool} and a search result's `source` is its URL (a text block's citations stay a list);
both were a 400 ("citations: {'enabled': True} is not of type 'array', 'null'", "source: ... is not of type
'object'"). A search_result block, in a user turn or a tool_result, reads as its title, source and texts."""
import pytest

from tests.unit.test_anthropic_errors import BAD_MESSAGES, expect_error
from tests.unit.test_anthropic_messages import BASE, prompt_of

ON = {"enabled": True}
DOC = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "The sky is green."},
       "title": "Sky", "citations": ON}
RESULT = {"type": "search_result", "source": "https://example.org/sky", "title": "Sky facts",
          "content": [{"type": "text", "text": "The sky is green."}, {"type": "text", "text": "Often."}],
          "citations": ON}
RESULT_TEXT = "Sky facts\nhttps://example.org/sky\nThe sky is green.\nOften."
QUESTION = {"type": "text", "text": "What colour is the sky?"}
CALL = {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "sky"}}
TOOL = {"name": "search", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}


@pytest.mark.parametrize("messages, rendered", [
    ([{"role": "user", "content": [DOC, QUESTION]}], "<|im_start|>user\nThe sky is green.What colour is the sky?"),
    ([{"role": "user", "content": [RESULT, QUESTION]}], f"<|im_start|>user\n{RESULT_TEXT}What colour is the sky?"),
    ([{"role": "user", "content": "What colour is the sky?"}, {"role": "assistant", "content": [CALL]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [RESULT]}]}],
     f"<tool_response>\n{RESULT_TEXT}\n</tool_response>"),
    ([{"role": "user", "content": [{"type": "text", "text": "Hi", "citations": []}]}], "<|im_start|>user\nHi"),
], ids=["document", "search result", "search result in a tool result", "text with citations"])
async def test_citation_enabled_blocks_are_read(stack, messages, rendered):
    client, fake = stack
    fake.script.reply = "Green."
    body = {**BASE, "tools": [TOOL], "messages": messages}
    response = await client.post("/v1/messages", json=body)
    assert response.status == 200, await response.text()
    assert (await response.json())["content"] == [{"type": "text", "text": "Green."}]
    assert rendered in prompt_of(fake)
    counted = await client.post("/v1/messages/count_tokens", json=body)
    assert (await counted.json())["input_tokens"] == len(fake.script.requests[-1].prompt_token_ids)


@pytest.mark.parametrize("block, fragment", [
    ({**DOC, "citations": [1]}, 'messages.0.content.0.citations: [1] is not of type "object", "null"'),
    ({"type": "text", "text": "Hi", "citations": ON}, 'messages.0.content.0.citations: {"enabled": true} is not of '
                                                      'type "array", "null"'),
    ({**RESULT, "source": {"url": "x"}}, 'messages.0.content.0.source: {"url": "x"} is not of type "string"'),
    ({**RESULT, "content": "text"}, "messages.0.content.0.content: Field required (a list of text blocks)"),
    ({k: v for k, v in RESULT.items() if k != "title"}, "messages.0.content.0.title: Field required"),
], ids=["document citations list", "text citations object", "search result source object", "content string",
        "no title"])
async def test_a_citation_field_of_the_wrong_form_is_a_400(stack, block, fragment):
    client, fake = stack
    body = {**BASE, "messages": [{"role": "user", "content": [block, QUESTION]}]}
    await expect_error(await client.post("/v1/messages", json=body), 400, BAD_MESSAGES, fragment)
    assert fake.script.requests == []
