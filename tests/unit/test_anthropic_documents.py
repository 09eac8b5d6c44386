"""Gateway over the fake scheduler: a document block whose source is plain text (Anthropic's 'text' source, or a
'content' source of text) is read as that text, as Anthropic reads it; it was refused as 'this model reads text only'.
A PDF source (base64, url, file) stays that 400."""
import pytest

from tests.unit.test_anthropic_errors import BAD_MESSAGES, BASE, expect_error
from tests.unit.test_anthropic_messages import prompt_of

TEXT = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "The sky is green."}}
CONTENT = {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "The sky"},
                                                                        {"type": "text", "text": "is green."}]}}


@pytest.mark.parametrize("document, text", [(TEXT, "The sky is green."), (CONTENT, "The sky\nis green.")],
                         ids=["text source", "content source"])
async def test_a_plain_text_document_is_read_as_its_text(stack, document, text):
    client, fake = stack
    fake.script.reply = "Green."
    messages = [{"role": "user", "content": [document, {"type": "text", "text": "What colour is the sky?"}]}]
    response = await client.post("/v1/messages", json={**BASE, "messages": messages})
    assert response.status == 200, await response.text()
    assert (await response.json())["content"] == [{"type": "text", "text": "Green."}]
    # Read as a text block is: the user turn's text parts, in order.
    assert f"<|im_start|>user\n{text}What colour is the sky?<|im_end|>" in prompt_of(fake)
    counted = await client.post("/v1/messages/count_tokens", json={**BASE, "messages": messages})
    assert (await counted.json())["input_tokens"] == len(fake.script.requests[-1].prompt_token_ids)


async def test_a_pdf_document_is_still_refused(stack):
    client, fake = stack
    pdf = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}}
    body = {**BASE, "messages": [{"role": "user", "content": [pdf, {"type": "text", "text": "Sum up"}]}]}
    error = await expect_error(await client.post("/v1/messages", json=body), 400, BAD_MESSAGES,
                               "messages.0.content.0: document blocks are not supported with a 'base64' source")
    assert "this model reads text only" in error["error"]["message"]
    assert fake.script.requests == []
