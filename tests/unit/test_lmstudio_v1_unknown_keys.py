"""LM Studio 0.4's /api/v1/chat validates its body strictly: a key its docs do not list is a 400 "Unrecognized key(s) in
object: 'stop'" (reported by its users: Merserk/Caption-Creator#4 for `stop`, vrgamegirl19/comfyui-vrgamedevgirl#124
for `seed`, whose client drops the key and retries on those words). Here such a key was ignored: `stop` and `seed`
ran unapplied, with a 200."""
import pytest

from gateway.lmstudio_v1_request import FIELDS

BASE = {"model": "fake-model", "input": "Hi", "max_output_tokens": 2}


@pytest.mark.parametrize("extra, message, param", [
    ({"stop": ["x"]}, "Unrecognized key(s) in object: 'stop'", "stop"),
    ({"seed": 1, "messages": []}, "Unrecognized key(s) in object: 'seed', 'messages'", "seed"),
    ({"max_tokens": 5}, "Unrecognized key(s) in object: 'max_tokens'", "max_tokens"),
], ids=["stop", "two", "openai-name"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_a_key_lm_studio_does_not_take_is_its_400(fake, extra, message, param, stream):
    client, servicer = fake
    response = await client.post("/api/v1/chat", json={**BASE, "stream": stream, **extra})
    assert response.status == 400
    error = (await response.json())["error"]
    assert (error["message"], error["param"], error["code"]) == (message, param, "unrecognized_keys")
    assert servicer.script.requests == []


async def test_every_documented_key_is_taken(fake):
    client, _ = fake
    body = {**BASE, "system_prompt": "Be brief.", "integrations": [], "stream": False, "temperature": 0.5,
            "top_p": 0.9, "top_k": 20, "min_p": 0.05, "repeat_penalty": 1.1, "reasoning": "off",
            "context_length": 1024, "store": False, "previous_response_id": None}
    assert set(body) == FIELDS
    response = await client.post("/api/v1/chat", json=body)
    assert response.status == 200, await response.text()
    assert (await response.json())["stats"]["total_output_tokens"] == 2
