"""/v1 serves a logit_bias past +-100 at +-100, as vLLM's SamplingParams.from_optional clamps it (vllm#50350 keeps
its Rust frontend to "the existing Python behavior") and llama.cpp adds any bias; it was OpenAI's 400 'greater than
the maximum of 100', which neither server answers (fake scheduler)."""
import pytest

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
ROUTES = [
    ("/v1/chat/completions", CHAT),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 2}),
    ("/api/v0/chat/completions", CHAT),
    ("/v1/responses", {"input": "hi", "max_output_tokens": 16}),
]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("path, base", ROUTES, ids=["chat", "completions", "lmstudio", "responses"])
async def test_a_bias_past_a_hundred_is_served_at_a_hundred(stack, path, base, stream):
    client, fake = stack
    body = {**base, "logit_bias": {"5": 250, "6": -1000, "7": 7.5, "8": -100}, "stream": stream}
    response = await client.post(path, json=body)
    text = await response.text()
    assert response.status == 200, text
    assert "Hello" in text
    assert dict(fake.script.requests[-1].sampling.logit_bias) == {5: 100.0, 6: -100.0, 7: 7.5, 8: -100.0}


async def test_llama_cpp_pairs_on_v1_are_served_at_a_hundred(stack):
    client, fake = stack
    response = await client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2,
                                                          "logit_bias": [[5, 101], [6, -1e300]]})
    assert response.status == 200, await response.text()
    assert dict(fake.script.requests[-1].sampling.logit_bias) == {5: 100.0, 6: -100.0}
