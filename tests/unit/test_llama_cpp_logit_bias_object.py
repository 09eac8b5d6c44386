"""llama.cpp's /completion reads a logit_bias object as llama-server does: a key that is a whole integer is a token id,
any other key a text each of whose tokens gets the bias (params_from_json_cmpl: strtol, else common_tokenize; its
README: an object {"<string or token id>": bias} for OpenAI compatibility). A text key was a 400 'not a token id';
/v1 keeps OpenAI's and vLLM's token-id keys (fake scheduler)."""
import pytest


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("given, expected", [
    ({"Hello": -100, "5": 3}, {"Hello": -100.0, 5: 3.0}),
    ({"Hello world": False}, {"Hello": -100.0, " world": -100.0}),
], ids=["text-and-id", "text-banned"])
async def test_object_keys_that_are_not_ids_are_texts(stack, given, expected, stream):
    client, fake = stack
    response = await client.post("/completion", json={"prompt": "hi", "n_predict": 2, "logit_bias": given,
                                                       "stream": stream})
    assert response.status == 200, await response.text()
    ids = {fake.tokenizer.encode(key).ids[0] if isinstance(key, str) else key: value for key, value in expected.items()}
    assert dict(fake.script.requests[-1].sampling.logit_bias) == ids


async def test_v1_keeps_token_id_keys(stack):
    client, fake = stack
    response = await client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2, "logit_bias": {"Hello": 1}})
    error = (await response.json())["error"]
    assert (response.status, error["param"]) == (400, "logit_bias") and "'Hello' is not a token id" in error["message"]
    assert fake.script.requests == []
