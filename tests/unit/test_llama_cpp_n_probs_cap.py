"""llama.cpp's n_probs past the alternatives served: llama-server returns min(n_vocab, n_probs) of them
(ggml-org/llama.cpp tools/server/server-context.cpp populate_token_probs: `for (size_t i = 0; i < std::min(n_vocab,
n_probs); i++)`), never a 400, so a llama.cpp client's n_probs 50 gets the most this server gives (20, vLLM's
--max-logprobs that the scheduler returns) on every route that reads n_probs. It was a 400 "invalid value for
'n_probs': 21 is greater than the maximum of 20". OpenAI's own counts (top_logprobs, logprobs) keep vLLM's 400."""
import orjson
import pytest

from gateway.logprob_limits import MAX_LOGPROBS

USER = [{"role": "user", "content": "hi"}]
ROUTES = [("/completion", {"prompt": "hi"}), ("/v1/chat/completions", {"messages": USER, "enable_thinking": False}),
          ("/v1/completions", {"prompt": "hi"}), ("/api/v0/completions", {"prompt": "hi"})]


@pytest.mark.parametrize("path, base", ROUTES, ids=["completion", "chat", "completions", "lmstudio"])
@pytest.mark.parametrize("n_probs", [21, 50, 100000])
async def test_n_probs_past_the_cap_gets_the_cap(stack, path, base, n_probs):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**base, "n_predict": 2, "n_probs": n_probs}))
    body = orjson.loads(await response.read())
    assert response.status == 200, body
    assert fake.script.requests[-1].sampling.num_logprobs == MAX_LOGPROBS


async def test_openai_top_logprobs_keeps_vllm_s_400(stack):
    client, fake = stack
    response = await client.post("/v1/chat/completions", data=orjson.dumps(
        {"messages": USER, "logprobs": True, "top_logprobs": 21, "max_tokens": 2}))
    assert response.status == 400 and fake.script.requests == []


async def test_a_negative_n_probs_stays_a_400(stack):
    client, fake = stack
    response = await client.post("/completion", data=orjson.dumps({"prompt": "hi", "n_probs": -1}))
    assert response.status == 400 and fake.script.requests == []
