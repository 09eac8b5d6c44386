"""POST /completion takes llama.cpp's multimodal prompt object {"prompt_string", "multimodal_data"} (its server README:
the prompt may be "a JSON object with prompt_string and multimodal_data", alone or in a list of prompts), as the text
of prompt_string; media are a 400 that says the model reads text only. It was a 400 "... is not of type 'string',
'array'" for every such prompt, media or not."""
import orjson
import pytest


async def _post(client, body) -> tuple[int, dict]:
    response = await client.post("/completion", data=orjson.dumps({"n_predict": 2, **body}))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("prompt", [{"prompt_string": "Hello world"},
                                    {"prompt_string": "Hello world", "multimodal_data": []}], ids=["text", "no-media"])
async def test_a_prompt_object_is_its_prompt_string(stack, prompt):
    client, fake = stack
    status, body = await _post(client, {"prompt": prompt})
    _, plain = await _post(client, {"prompt": "Hello world"})
    assert status == 200 and body["prompt"] == "Hello world" and body["stop_type"] == "limit"
    assert list(fake.script.requests[0].prompt_token_ids) == list(fake.script.requests[1].prompt_token_ids)
    assert body["tokens_evaluated"] == plain["tokens_evaluated"]


async def test_prompt_objects_in_a_list_are_each_a_prompt(stack):
    client, _ = stack
    status, body = await _post(client, {"prompt": [{"prompt_string": "Hello"}, "world"]})
    assert status == 200 and [item["prompt"] for item in body] == ["Hello", "world"]


@pytest.mark.parametrize("prompt, param", [
    ({"prompt_string": "hi <__media__>", "multimodal_data": ["aGk="]}, "prompt.multimodal_data"),
    ([{"prompt_string": "hi", "multimodal_data": ["aGk="]}], "prompt[0].multimodal_data"),
    ({"text": "hi"}, "prompt")], ids=["media", "media-in-list", "no-prompt-string"])
async def test_media_or_a_malformed_object_is_llama_cpps_400(stack, prompt, param):
    client, fake = stack
    status, body = await _post(client, {"prompt": prompt})
    assert status == 400 and body["error"]["code"] == 400 and body["error"]["param"] == param
    assert ("text-only model" in body["error"]["message"]) == (param != "prompt")
    assert not fake.script.requests
