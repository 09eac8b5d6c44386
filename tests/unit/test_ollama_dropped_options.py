"""Ollama options its current api.Options no longer has (mirostat, tfs_z, ...): accepted and ignored over HTTP, as
Ollama's Options.FromMap ignores them; a wrong type for an option it has stays a 400 in its words."""
import pytest

from tests.unit.test_ollama_options import DROPPED


@pytest.mark.parametrize("path, body, text", [
    ("/api/generate", {"prompt": "Hi"}, lambda answer: answer["response"]),
    ("/api/chat", {"messages": [{"role": "user", "content": "Hi"}]}, lambda answer: answer["message"]["content"]),
], ids=["generate", "chat"])
async def test_dropped_options_are_accepted_and_change_nothing(fake, path, body, text):
    client, servicer = fake
    base = {"model": "fake-model", "stream": False, "think": False, **body}
    answer = await (await client.post(path, json={**base, "options": {**DROPPED, "seed": 7}})).json()
    plain = await (await client.post(path, json={**base, "options": {"seed": 7}})).json()
    assert text(answer) == text(plain) == "Hello world" and answer["done_reason"] == "stop"
    assert servicer.script.requests[0].sampling == servicer.script.requests[1].sampling


@pytest.mark.parametrize("options, message", [
    ({"temperature": "hot"}, 'option "temperature" must be of type float32'),
    ({"use_mmap": 1}, 'option "use_mmap" must be of type boolean'),
    ({"num_thread": "8"}, 'option "num_thread" must be of type integer'),
], ids=["temperature", "use_mmap", "num_thread"])
async def test_wrong_type_for_an_option_ollama_has_is_its_error(fake, options, message):
    """Ollama's FromMap words (it answers them 500 through handleScheduleError; a client error here: 400)."""
    client, _ = fake
    response = await client.post("/api/generate", json={"model": "fake-model", "prompt": "Hi", "options": options})
    assert response.status == 400 and await response.json() == {"error": message}
