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


async def test_list_keys_that_are_integral_floats_are_token_ids(stack):
    """[[5.0, false]] passes the schema's integer as token id 5; it was tokenized as a text: a 500 TypeError, 'expected
    string or bytes-like object, got float'. One past the vocabulary is the 400 in llama.cpp's shape."""
    client, fake = stack
    response = await client.post("/completion", json={"prompt": "hi", "n_predict": 2, "logit_bias": [[5.0, False]]})
    assert response.status == 200, await response.text()
    assert dict(fake.script.requests[-1].sampling.logit_bias) == {5: -100.0}
    response = await client.post("/completion", json={"prompt": "hi", "n_predict": 2, "logit_bias": [[1e308, 1]]})
    error = (await response.json())["error"]
    assert (response.status, error["code"], error["type"]) == (400, 400, "invalid_request_error")
    assert error["message"].startswith("logit_bias token id 1000000000000000010979063629440455417404923096773118")


@pytest.mark.parametrize("bias, sent", [([[5, 150]], {5: 100.0}), ([[5, -1000]], {5: -100.0}),
                                        ({"5": 250}, {5: 100.0}), ([[5, 7.5]], {5: 7.5})],
                         ids=["list-above", "list-below", "object-above", "inside"])
async def test_completion_bias_past_a_hundred_is_served_at_it(stack, bias, sent):
    """llama.cpp adds any bias as sent; past +-100 the token is as forced or banned as at it. It was /v1's 400."""
    client, fake = stack
    response = await client.post("/completion", json={"prompt": "hi", "n_predict": 1, "logit_bias": bias})
    assert response.status == 200, await response.text()
    assert dict(fake.script.requests[-1].sampling.logit_bias) == sent
