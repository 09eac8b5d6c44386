"""Each API's requests (fake scheduler) name the sampler chain of its reference server (worker/sampling_chain.py):
vLLM's on /v1, Ollama's on /api, llama.cpp's on /completion, with llama-server's penalty window (repeat_last_n 64)."""
import orjson
import pytest

from proto import pb

VLLM, OLLAMA, LLAMA_CPP = (pb.SamplingParams.CHAIN_VLLM, pb.SamplingParams.CHAIN_OLLAMA,
                           pb.SamplingParams.CHAIN_LLAMA_CPP)


async def sent_sampling(client, fake, path: str, body: dict):
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    return fake.script.requests[-1].sampling


@pytest.mark.parametrize("path, body, chain", [
    ("/v1/completions", {"prompt": "hi", "max_tokens": 2}, VLLM),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}, VLLM),
    ("/api/generate", {"model": "m", "prompt": "hi", "stream": False, "options": {"num_predict": 2}}, OLLAMA),
    ("/completion", {"prompt": "hi", "n_predict": 2}, LLAMA_CPP),
], ids=["completions", "chat", "ollama", "llama.cpp"])
async def test_each_api_names_its_chain(stack, path, body, chain):
    client, fake = stack
    if path == "/api/generate":
        body["model"] = (await (await client.get("/v1/models")).json())["data"][0]["id"]
    assert (await sent_sampling(client, fake, path, body)).chain == chain


@pytest.mark.parametrize("fields, window, presence", [
    ({}, 64, 0.5), ({"repeat_last_n": -1}, 0, 0.5), ({"repeat_last_n": 8}, 8, 0.5), ({"repeat_last_n": 0}, 0, 0.0),
], ids=["default-64", "minus-one-all", "eight", "zero-off"])
async def test_completion_penalty_window_is_llama_servers(stack, fields, window, presence):
    """llama-server's penalty_last_n is 64 unless repeat_last_n is sent (common_params_sampling); 0 turns the
    repetition, frequency and presence penalties off together (its penalties sampler returns at once)."""
    client, fake = stack
    body = {"prompt": "hi", "n_predict": 2, "repeat_penalty": 1.2, "presence_penalty": 0.5,
            "frequency_penalty": 0.5, **fields}
    sampling = await sent_sampling(client, fake, "/completion", body)
    assert sampling.repetition_window == window
    assert (round(sampling.presence_penalty, 6), round(sampling.frequency_penalty, 6)) == (presence, presence)
    assert round(sampling.repetition_penalty, 6) == (1.0 if fields.get("repeat_last_n") == 0 else 1.2)


async def test_completion_states_the_window_it_used(stack):
    client, fake = stack
    response = await client.post("/completion", data=orjson.dumps({"prompt": "hi", "n_predict": 2}))
    assert (await response.json())["generation_settings"]["repeat_last_n"] == 64
    props = await (await client.get("/props")).json()
    assert props["default_generation_settings"]["params"]["repeat_last_n"] == 64


async def test_v1_keeps_vllms_whole_window(stack):
    """/v1 (vLLM) has no window: the repetition penalty covers the whole prompt+output unless repeat_last_n is sent."""
    client, fake = stack
    sampling = await sent_sampling(client, fake, "/v1/completions", {"prompt": "hi", "max_tokens": 2, "repeat_penalty": 1.2})
    assert sampling.repetition_window == 0


async def test_completion_takes_a_temperature_above_two(stack):
    """llama.cpp sets no upper bound on temperature (server-schema clamps only a negative one to 0); /completion
    refused 5 with /v1's 400 'greater than the maximum of 2'. /v1 keeps that bound."""
    client, fake = stack
    response = await client.post("/completion", data=orjson.dumps({"prompt": "hi", "n_predict": 2, "temperature": 5}))
    assert response.status == 200, await response.text()
    assert fake.script.requests[-1].sampling.temperature == 5.0
    assert (await response.json())["generation_settings"]["temperature"] == 5.0
    response = await client.post("/v1/completions", data=orjson.dumps({"prompt": "hi", "temperature": 5}))
    assert response.status == 400


@pytest.mark.parametrize("path, body, sent", [
    ("/v1/completions", {"prompt": "hi", "max_tokens": 2, "temperature": 0.001}, 0.01),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 2, "temperature": 1e-6}, 0.01),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 2, "temperature": 0}, 0.0),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 2, "temperature": 0.5}, 0.5),
    ("/completion", {"prompt": "hi", "n_predict": 2, "temperature": 0.001}, 0.001),
], ids=["v1-0.001", "v1-1e-6", "v1-zero", "v1-0.5", "llama.cpp-0.001"])
async def test_vllm_raises_a_tiny_temperature_to_a_hundredth(stack, path, body, sent):
    """vLLM's SamplingParams.__post_init__ raises 0 < temperature < _MAX_TEMP (0.01) to 0.01, so 1e-6 samples at 0.01
    instead of being greedy (only 0 is); llama.cpp divides by what it is sent."""
    client, fake = stack
    assert (await sent_sampling(client, fake, path, body)).temperature == pytest.approx(sent, rel=1e-6)


@pytest.mark.parametrize("options, presence", [({}, 0.5), ({"repeat_last_n": 0}, 0.0)], ids=["default", "zero-off"])
async def test_ollama_repeat_last_n_zero_turns_every_penalty_off(stack, options, presence):
    """Ollama's penalties are llama.cpp's sampler's: a window of 0 turns repeat, presence and frequency off together
    (only repeat_penalty was)."""
    client, fake = stack
    model = (await (await client.get("/v1/models")).json())["data"][0]["id"]
    body = {"model": model, "prompt": "hi", "stream": False,
            "options": {"num_predict": 2, "presence_penalty": 0.5, "frequency_penalty": 0.5, **options}}
    sampling = await sent_sampling(client, fake, "/api/generate", body)
    assert (round(sampling.presence_penalty, 6), round(sampling.frequency_penalty, 6)) == (presence, presence)


async def test_completion_defaults_are_llama_servers(stack):
    """A field neither the request nor generation_config sets takes llama-server's default (common_params_sampling):
    min_p 0.05 on /completion and in /props, where /v1 keeps vLLM's 0."""
    client, fake = stack
    card_defaults = set(orjson.loads(fake.generation_config or b"{}"))
    assert "min_p" not in card_defaults
    sampling = await sent_sampling(client, fake, "/completion", {"prompt": "hi", "n_predict": 2})
    assert round(sampling.min_p, 6) == 0.05
    sampling = await sent_sampling(client, fake, "/completion", {"prompt": "hi", "n_predict": 2, "min_p": 0})
    assert sampling.min_p == 0.0
    sampling = await sent_sampling(client, fake, "/v1/completions", {"prompt": "hi", "max_tokens": 2})
    assert sampling.min_p == 0.0
    params = (await (await client.get("/props")).json())["default_generation_settings"]["params"]
    assert round(params["min_p"], 6) == 0.05
