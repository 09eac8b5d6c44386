"""llama.cpp's /completion, and Ollama's options.seed (which Ollama hands to its llama-server runner as it is, llm/
llama_server.go), read seed as llama-server does: a uint32 (its json_value wraps -1 to 0xFFFFFFFF), whose
LLAMA_DEFAULT_SEED 0xFFFFFFFF means a random seed drawn anew for each request (src/llama-sampling.cpp get_rng_seed;
llama.cpp PR #9398 'This should fix the server generating always the same response'). It was a fixed seed here, so a
client that sends the seed /props states for "random" got one answer forever. /v1 keeps vLLM's seed (fake
scheduler)."""
import pytest


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("seed, has_seed, used", [
    (4294967295, False, 0), (-1, False, 0), (5, True, 5), (2 ** 32 + 5, True, 5), (-2, True, 2 ** 32 - 2),
], ids=["default-seed-is-random", "minus-one-is-random", "fixed", "wraps-to-uint32", "minus-two-wraps"])
async def test_completion_reads_seed_as_a_uint32_whose_default_is_random(stack, seed, has_seed, used, stream):
    client, fake = stack
    response = await client.post("/completion", json={"prompt": "hi", "n_predict": 2, "seed": seed,
                                                       "stream": stream})
    assert response.status == 200, await response.text()
    sampling = fake.script.requests[-1].sampling
    assert (sampling.has_seed, sampling.seed) == (has_seed, used)
    if not stream:
        body = await response.json()
        assert body["generation_settings"]["seed"] == (used if has_seed else 4294967295)


async def test_v1_keeps_vllms_seed(stack):
    client, fake = stack
    response = await client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2, "seed": 4294967295})
    assert response.status == 200
    sampling = fake.script.requests[-1].sampling
    assert (sampling.has_seed, sampling.seed) == (True, 4294967295)


@pytest.mark.parametrize("path, body", [("/api/generate", {"prompt": "hi"}),
                                        ("/api/chat", {"messages": [{"role": "user", "content": "hi"}]})],
                         ids=["generate", "chat"])
@pytest.mark.parametrize("seed, has_seed, used", [
    (4294967295, False, 0), (-1, False, 0), (42, True, 42), (2 ** 32 + 5, True, 5), (-2, True, 2 ** 32 - 2),
], ids=["default-seed-is-random", "minus-one-is-random", "fixed", "wraps-to-uint32", "minus-two-is-fixed"])
async def test_ollama_reads_seed_as_its_llama_server_does(stack, path, body, seed, has_seed, used):
    client, fake = stack
    response = await client.post(path, json={"model": "fake-model", "stream": False, **body,
                                             "options": {"seed": seed, "num_predict": 2}})
    assert response.status == 200, await response.text()
    sampling = fake.script.requests[-1].sampling
    assert (sampling.has_seed, sampling.seed) == (has_seed, used)
