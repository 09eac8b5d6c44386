"""Images sent to this text-only model are refused in the words clients match: llama-server's "image input is not
supported" (its answer without a projector, which Ollama passes through for a text model's /api/chat and
/api/generate images), so a client's retry without the images, or its text-only marking of the model, works here."""
import orjson
import pytest

from gateway.errors import IMAGES_UNSUPPORTED

PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@pytest.mark.parametrize("path, body", [
    ("/api/chat", {"messages": [{"role": "user", "content": "What is this?", "images": [PIXEL]}]}),
    ("/api/chat", {"messages": [{"role": "user", "content": "What is this?", "images": [PIXEL]}], "stream": False}),
    ("/api/generate", {"prompt": "What is this?", "images": [PIXEL]}),
    ("/api/v1/chat", {"input": [{"type": "image", "data_url": f"data:image/png;base64,{PIXEL}"}]}),
], ids=["ollama chat", "ollama chat whole", "ollama generate", "lm studio v1 chat"])
async def test_an_image_is_refused_in_the_words_clients_match(stack, path, body):
    client, servicer = stack
    response = await client.post(path, json={"model": "fake-model", **body})
    assert response.status == 400 and not servicer.script.requests
    answer = orjson.loads(await response.read())
    message = answer["error"] if isinstance(answer["error"], str) else answer["error"]["message"]
    assert message == IMAGES_UNSUPPORTED
    assert message.startswith("image input is not supported")
