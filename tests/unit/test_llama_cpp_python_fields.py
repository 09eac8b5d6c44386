"""Gateway with the fake scheduler: llama-cpp-python's server names for sampling on /v1 (llama_cpp/server/types.py),
read as its server reads them: logit_bias_type "tokens" biases each token of a text key (it was a 400 'not a token
id'), and mirostat_mode, its mirostat switch, is read as llama.cpp's mirostat (it was ignored)."""
import pytest

COMPLETION = {"model": "fake-model", "prompt": "Say hello.", "max_tokens": 2}
CHAT = {"model": "fake-model", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 2}


@pytest.mark.parametrize("path,body", [("/v1/completions", COMPLETION), ("/v1/chat/completions", CHAT)],
                         ids=["completions", "chat"])
async def test_logit_bias_type_tokens_biases_each_token_of_a_text(stack, path, body):
    client, fake = stack
    response = await client.post(path, json={**body, "logit_bias_type": "tokens",
                                             "logit_bias": {" hello world": 5, "<|im_end|>": False}})
    assert response.status == 200, await response.text()
    words = fake.tokenizer.encode(" hello world", add_special_tokens=False).ids
    # special=True, as llama-cpp-python tokenizes the key: the end-of-turn text is its one token, banned.
    end = fake.tokenizer.encode("<|im_end|>", add_special_tokens=False).ids
    assert len(words) > 1 and len(end) == 1
    assert dict(fake.script.requests[-1].sampling.logit_bias) == {**dict.fromkeys(words, 5.0), end[0]: -100.0}


async def test_logit_bias_type_input_ids_reads_token_ids(stack):
    client, fake = stack
    response = await client.post("/v1/completions", json={**COMPLETION, "logit_bias_type": "input_ids",
                                                          "logit_bias": {"7": -3}})
    assert response.status == 200 and dict(fake.script.requests[-1].sampling.logit_bias) == {7: -3.0}
    refused = await client.post("/v1/completions", json={**COMPLETION, "logit_bias_type": "words"})
    assert refused.status == 400 and (await refused.json())["error"]["param"] == "logit_bias_type"


@pytest.mark.parametrize("path,body", [("/v1/completions", COMPLETION), ("/v1/chat/completions", CHAT)],
                         ids=["completions", "chat"])
async def test_mirostat_mode_is_llama_cpps_mirostat(stack, path, body):
    # llama.cpp's mirostat versions run (worker/mirostat.py); another version is refused, as llama.cpp has none.
    client, fake = stack
    response = await client.post(path, json={**body, "mirostat_mode": 2, "mirostat_tau": 4.0, "mirostat_eta": 0.2})
    assert response.status == 200
    sent = fake.script.requests[-1].sampling
    assert (sent.mirostat, sent.mirostat_tau, sent.mirostat_eta) == (2, 4.0, pytest.approx(0.2))
    response = await client.post(path, json={**body, "mirostat_mode": 3})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "mirostat_mode" and "mirostat" in error["message"]
