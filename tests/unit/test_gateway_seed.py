"""vLLM's seed -1: no seed, so sampling is random, on chat and completions (fake scheduler)."""
import orjson
import pytest

USER = [{"role": "user", "content": "hi"}]
ROUTES = [("/v1/chat/completions", {"messages": USER}), ("/v1/completions", {"prompt": "hi"}),
          ("/api/v0/chat/completions", {"messages": USER})]


@pytest.mark.parametrize("path, body", ROUTES)
async def test_seed_minus_one_is_no_seed(stack, path, body):
    # vLLM's SamplingParams.__post_init__: 'if self.seed == -1: self.seed = None' (llama.cpp's server, which LM Studio
    # runs, reads -1 as a random seed too). It was the fixed seed 2^64 - 1 here: every such request wrote the same text.
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**body, "seed": -1, "n": 2, "max_tokens": 2}))
    out = await response.json()
    assert response.status == 200 and [c["index"] for c in out["choices"]] == [0, 1]
    assert [r.sampling.has_seed for r in fake.script.requests] == [False, False]


@pytest.mark.parametrize("seed, sent", [(0, [0, 1]), (-2, [(1 << 64) - 2, (1 << 64) - 1]), (7, [7, 8])],
                         ids=["zero", "minus-two", "seven"])
async def test_other_seeds_are_kept(stack, seed, sent):
    client, fake = stack
    response = await client.post("/v1/completions", data=orjson.dumps({"prompt": "hi", "seed": seed, "n": 2,
                                                                       "max_tokens": 2}))
    assert response.status == 200 and len((await response.json())["choices"]) == 2
    assert sorted(r.sampling.seed for r in fake.script.requests) == sent
    assert all(r.sampling.has_seed for r in fake.script.requests)
