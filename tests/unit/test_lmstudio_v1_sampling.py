"""LM Studio 0.4's /api/v1/chat sampling fields (fake scheduler) over their documented ranges (lmstudio-ai/docs
1_developer/2_rest/chat.md: top_p "[0,1]"): top_p 0 keeps the most likely token, as LM Studio's llama.cpp sampler
reads it (on /api/v0 too), instead of the OpenAI route's 400 for a value outside (0, 1]."""
import pytest


async def test_top_p_zero_keeps_the_most_likely_token(fake):
    client, servicer = fake
    response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Hi", "top_p": 0,
                                                        "reasoning": "off"})
    answer = await response.json()
    assert response.status == 200 and answer["output"] == [{"type": "message", "content": "Hello world"}]
    assert 0 < servicer.script.requests[-1].sampling.top_p <= 1e-9


@pytest.mark.parametrize("top_p", [-0.1, 1.5, False, "0"], ids=["negative", "above one", "false", "string"])
async def test_a_top_p_outside_the_range_is_still_a_400_naming_it(fake, top_p):
    client, servicer = fake
    response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Hi", "top_p": top_p})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "top_p" and not servicer.script.requests


@pytest.mark.parametrize("path, body", [
    ("/api/v0/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "enable_thinking": False}),
    ("/api/v0/completions", {"prompt": "Hi"}),
], ids=["v0 chat", "v0 completions"])
async def test_v0_takes_top_p_zero_too(fake, path, body):
    client, servicer = fake
    response = await client.post(path, json={"model": "fake-model", "top_p": 0, **body})
    choice = (await response.json())["choices"][0]
    assert response.status == 200 and (choice.get("message") or {}).get("content", choice.get("text")) == "Hello world"
    assert 0 < servicer.script.requests[-1].sampling.top_p <= 1e-9
