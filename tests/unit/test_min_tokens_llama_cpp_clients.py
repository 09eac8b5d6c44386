"""A llama.cpp client's min_tokens above its output limit is held at the limit, not vLLM's 400 (fake scheduler):
llama-server has no min_tokens field (it ignores it), and the servers whose clients send it beside llama.cpp's fields
take it as a floor under the limit. SillyTavern sends its min_length as min_tokens to every text-completion source
(public/scripts/textgen-settings.js getTextGenGenerationData), with llama.cpp's n_predict beside it: its LLaMa-Precise
and Beam Search presets (min_length 200) against its default 80-token reply were a 400 on /completion and, from its
TabbyAPI, KoboldCpp and text-generation-webui sources, on /v1/completions. A request without llama.cpp's fields keeps
vLLM's 400 (tests/unit/test_min_tokens_gateway.py)."""
import pytest

USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("path, body", [
    ("/completion", {"prompt": "hi", "n_predict": 80, "min_tokens": 200}),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 80, "n_predict": 80, "min_tokens": 200, "cache_prompt": True}),
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 80, "min_tokens": 200, "cache_prompt": True}),
], ids=["llama.cpp completion", "completions", "chat"])
async def test_a_llama_cpp_clients_min_tokens_is_held_at_the_limit(stack, path, body):
    client, fake = stack
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    request = fake.script.requests[-1]
    assert (request.sampling.min_tokens, request.max_tokens) == (80, 80)


async def test_several_prompts_hold_it_at_the_smallest_room(stack):
    """n_predict -1 is llama.cpp's no limit: each prompt gets the room the context leaves (2048 - 2 - its length),
    and min_tokens is held at the smallest."""
    client, fake = stack
    response = await client.post("/v1/completions", json={"prompt": ["hi", "hi " * 100], "min_tokens": 2000,
                                                          "n_predict": -1})
    assert response.status == 200, await response.text()
    assert fake.script.requests[-1].sampling.min_tokens == 1748


async def test_min_tokens_under_the_limit_is_kept(stack):
    client, fake = stack
    response = await client.post("/completion", json={"prompt": "hi", "n_predict": 80, "min_tokens": 20})
    assert response.status == 200
    assert fake.script.requests[-1].sampling.min_tokens == 20
