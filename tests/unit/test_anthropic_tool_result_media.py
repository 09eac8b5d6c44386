"""Gateway over the fake scheduler: an image or a PDF in a tool_result (Claude Code's Read of a picture, an MCP
screenshot) is a line saying it was left out, since the tool result is replayed in every later request and its 400
ended the session (claude-code#91112, lmstudio-ai/localization#425); in a user's own turn it stays the 400."""
import pytest

from tests.unit.test_anthropic_errors import BAD_MESSAGES, BASE, IMAGE, USER, expect_error
from tests.unit.test_anthropic_messages import prompt_of

READ = {"name": "Read", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}
CALL = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/repo/shot.png"}}
PDF = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}}


def loop(*content: dict) -> list:
    """A tool loop whose tool_result holds content, then the user's question in the same turn."""
    return [*USER, {"role": "assistant", "content": [CALL]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": list(content)},
                                         {"type": "text", "text": "What does it show?"}]}]


@pytest.mark.parametrize("content, response", [
    ([IMAGE], "[image (image/png) left out: this model reads text only]"),
    ([{"type": "text", "text": "Read 1 image"}, IMAGE],
     "Read 1 image\n[image (image/png) left out: this model reads text only]"),
    ([PDF], "[document (application/pdf) left out: this model reads text only]"),
    ([{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}],
     "[image left out: this model reads text only]"),
], ids=["image", "text and image", "pdf", "image url"])
async def test_media_in_a_tool_result_is_a_line_saying_it_was_left_out(stack, content, response):
    client, fake = stack
    body = {**BASE, "tools": [READ], "messages": loop(*content)}
    answer = await client.post("/v1/messages", json=body)
    assert answer.status == 200, await answer.text()
    assert (await answer.json())["content"] == [{"type": "text", "text": "Hello world"}]
    assert f"<tool_response>\n{response}\n</tool_response>" in prompt_of(fake)
    fields = ("model", "thinking", "tools", "messages")
    counted = await client.post("/v1/messages/count_tokens", json={key: body[key] for key in fields})
    assert (await counted.json())["input_tokens"] == len(fake.script.requests[-1].prompt_token_ids)


async def test_an_image_the_user_sends_is_still_refused(stack):
    client, fake = stack
    body = {**BASE, "messages": [{"role": "user", "content": [{"type": "text", "text": "Look"}, IMAGE]}]}
    await expect_error(await client.post("/v1/messages", json=body), 400, BAD_MESSAGES,
                       "messages.0.content.1: image blocks are not supported: this model reads text only")
    assert fake.script.requests == []
