"""llama.cpp's post_sampling_probs on /completion: n_probs of the distribution each token is drawn from, after the
sampler chain (logit_bias, grammar, penalties, top_k / top_p / min_p, temperature; a greedy token at 1), written as
{"id", "token", "bytes", "prob", "top_probs": [{"id", "token", "bytes", "prob"}]} with the filtered-out tokens left out
(tools/server/server-task.cpp probs_vector_to_json; README /completion: "logprob will be replaced with prob ...
top_logprobs will be replaced with top_probs ... Number of elements in top_probs may be less than n_probs"). Clients
score grammar-constrained labels with it (a `root ::= [ABC]` grammar, n_predict 1, post_sampling_probs true: the
labels' probabilities, summing to 1). It was the 400 'post_sampling_probs: probabilities after the sampler chain are
not supported'. llama-server's chat answers its logprobs.content entries in that shape too (to_json_oaicompat_chat);
the completions routes keep OpenAI's logprobs shape and the 400."""
import math

import torch

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from proto import pb
from worker.sampler import Sampler, SamplingState

V = 50


def _state(**params) -> SamplingState:
    return SamplingState("r", pb.SamplingParams(num_logprobs=8, post_sampling_probs=True, **params), [1, 2], [])


def test_a_sampled_token_reads_the_filtered_renormalised_distribution():
    logits = torch.randn(1, V, generator=torch.Generator().manual_seed(4))
    out = Sampler(V, seed=1).sample(logits, [_state(temperature=0.7, top_k=3, logit_bias={7: 30.0})])
    ids, logprobs = out.top_logprobs[0]
    finite = [(i, lp) for i, lp in zip(ids, logprobs) if math.isfinite(lp)]
    # token 7 (biased +30) holds nearly all of it; top_k 3 leaves three tokens whose probabilities sum to 1
    assert len(finite) == 3 and finite[0][0] == 7 and out.token_ids[0] == 7
    assert abs(sum(math.exp(lp) for _, lp in finite) - 1) < 1e-5
    biased = logits[0].clone()
    biased[7] += 30.0
    kept = biased.topk(3).indices.tolist()
    expected = (biased[kept] / 0.7).softmax(dim=-1)
    assert sorted(i for i, _ in finite) == sorted(kept)
    assert abs(out.logprobs[0] - math.log(expected[kept.index(7)])) < 1e-4


def test_a_greedy_token_is_certain_and_alone():
    logits = torch.randn(2, V, generator=torch.Generator().manual_seed(5))
    out = Sampler(V).sample(logits, [_state(temperature=0), SamplingState("raw", pb.SamplingParams(
        temperature=0, num_logprobs=2), [1], [])])
    ids, logprobs = out.top_logprobs[0]
    assert out.logprobs[0] == 0.0 and ids[0] == out.token_ids[0] == int(logits[0].argmax())
    assert not any(math.isfinite(lp) for lp in logprobs[1:])
    # a row without it keeps the model's raw distribution
    assert math.isclose(out.logprobs[1], float(logits[1].log_softmax(-1).max()), rel_tol=1e-5)


async def test_completion_asks_for_it_and_answers_prob_and_top_probs():
    fake = FakeServing(build_tokenizer())
    fake.script.reply, fake.script.top_ids = "a", [5, 6]
    async with fake_gateway(fake) as (client, _):
        response = await client.post("/completion", json={"prompt": "hi", "n_predict": 1, "n_probs": 2,
                                                          "post_sampling_probs": True})
        body = await response.json()
        assert response.status == 200, body
        assert fake.script.requests[-1].sampling.post_sampling_probs is True
        [entry] = body["completion_probabilities"]
        assert list(entry) == ["id", "token", "bytes", "prob", "top_probs"]
        assert math.isclose(entry["prob"], math.exp(-0.5))
        assert [(p["id"], list(p)) for p in entry["top_probs"]] == [(5, ["id", "token", "bytes", "prob"]),
                                                                    (6, ["id", "token", "bytes", "prob"])]
        response = await client.post("/completion", json={"prompt": "hi", "n_predict": 1, "n_probs": 2})
        assert "logprob" in (await response.json())["completion_probabilities"][0]
        assert fake.script.requests[-1].sampling.post_sampling_probs is False


async def test_chat_answers_its_logprobs_content_in_that_shape():
    fake = FakeServing(build_tokenizer())
    fake.script.reply, fake.script.top_ids = "a", [5, 6]
    async with fake_gateway(fake) as (client, _):
        response = await client.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "logprobs": True, "top_logprobs": 2,
            "post_sampling_probs": True, "chat_template_kwargs": {"enable_thinking": False}})
        body = await response.json()
        assert response.status == 200, body
        assert fake.script.requests[-1].sampling.post_sampling_probs is True
        [entry] = body["choices"][0]["logprobs"]["content"]
        assert list(entry) == ["id", "token", "bytes", "prob", "top_probs"]
        assert math.isclose(entry["prob"], math.exp(-0.5))
        assert [p["id"] for p in entry["top_probs"]] == [5, 6]
