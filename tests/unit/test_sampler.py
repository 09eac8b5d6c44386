"""Unit tests: the worker's batched sampler (greedy, filters, penalties, bias, seeds, logprobs)."""
import math

import pytest
import torch

from proto import pb
from worker.sampler import Sampler, SamplingState, _filter

V = 50


def state(req_id="r", prompt=(1, 2, 3), outputs=(), **params):
    return SamplingState(req_id, pb.SamplingParams(**params), list(prompt), list(outputs))


def logits_for(rows, seed=0):
    return torch.randn(rows, V + 6, generator=torch.Generator().manual_seed(seed))  # 6 padded LM-head rows


def test_greedy_is_argmax_and_never_picks_padded_ids():
    logits = logits_for(3)
    logits[:, V:] = 100.0
    out = Sampler(V).sample(logits, [state(), state(), state()])
    assert out.token_ids == logits[:, :V].argmax(dim=-1).tolist()
    expected = logits[:, :V].log_softmax(-1).max(dim=-1).values.tolist()
    assert out.logprobs == pytest.approx(expected, abs=1e-5)


def test_top_k_one_and_tiny_top_p_equal_greedy():
    logits = logits_for(4, seed=1)
    states = [state(temperature=1.5, top_k=1), state(temperature=1.0, top_p=1e-6),
              state(temperature=2.0, min_p=1.0), state()]
    out = Sampler(V, seed=3).sample(logits, states)
    assert out.token_ids == logits[:, :V].argmax(dim=-1).tolist()


def test_top_k_restricts_support():
    logits = logits_for(1, seed=2).repeat(200, 1)
    out = Sampler(V, seed=5).sample(logits, [state(temperature=5.0, top_k=3)] * 200)
    allowed = set(logits[0, :V].topk(3).indices.tolist())
    assert set(out.token_ids) == allowed  # high temperature: all three show up, nothing else


def test_sampling_follows_distribution():
    logits = torch.full((4000, V), -30.0)
    logits[:, 7], logits[:, 9] = 0.0, math.log(3.0)
    out = Sampler(V, seed=11).sample(logits, [state(temperature=1.0)] * 4000)
    share = out.token_ids.count(9) / 4000
    assert set(out.token_ids) == {7, 9}
    assert abs(share - 0.75) < 0.04


def test_seeded_rows_ignore_batch_neighbours_and_depend_on_index():
    logits = logits_for(1, seed=4)
    seeded = dict(temperature=1.0, has_seed=True, seed=1234)
    alone = Sampler(V, seed=1).sample(logits, [state(**seeded)]).token_ids[0]
    crowd = torch.cat([logits_for(5, seed=9)[:, :V + 6], logits], dim=0)
    others = [state(temperature=0.7), state(), state(temperature=1.0, top_p=0.5), state(**seeded, outputs=[1]),
              state(temperature=1.0, presence_penalty=1.0, outputs=[2])]
    in_batch = Sampler(V, seed=2).sample(crowd, others + [state(**seeded)]).token_ids[-1]
    assert in_batch == alone
    picks = {Sampler(V).sample(logits, [state(**seeded, outputs=[0] * i)]).token_ids[0] for i in range(30)}
    assert len(picks) > 1  # token i's noise depends on i


def test_penalties_and_bias():
    logits = torch.zeros(4, V)
    logits[:, 5] = 1.0
    states = [state(outputs=[5], frequency_penalty=2.0),
              state(prompt=[5], repetition_penalty=2.0),
              state(logit_bias={7: 3.0}),
              state(outputs=[5, 5], presence_penalty=0.5)]
    out = Sampler(V).sample(logits.clone(), states)
    assert out.token_ids[0] != 5       # 1 - 2 < 0
    assert out.token_ids[1] == 5       # 1 / 2 = 0.5 still the best
    assert out.token_ids[2] == 7
    assert out.token_ids[3] == 5       # 1 - 0.5 > 0
    assert out.logprobs[2] == pytest.approx(torch.zeros(V).index_fill(0, torch.tensor([5]), 1.0)
                                            .log_softmax(0)[7].item(), abs=1e-6)


@pytest.mark.parametrize("window, penalized", [(0, True), (3, False), (4, True)], ids=["all", "last 3", "last 4"])
def test_repetition_window_looks_back_that_many_tokens(window, penalized):
    """Token 5 sits 4 tokens back in prompt+output: a window of 3 (Ollama's repeat_last_n) no longer penalizes it."""
    logits = torch.zeros(1, V)
    logits[0, 5], logits[0, 6] = 1.0, 0.75
    row = state(prompt=[5, 1], outputs=[2, 3], repetition_penalty=2.0, repetition_window=window)
    assert Sampler(V).sample(logits, [row]).token_ids == [6 if penalized else 5]


def test_top_logprobs_only_where_asked():
    logits = logits_for(2, seed=6)
    out = Sampler(V).sample(logits, [state(num_logprobs=3), state()])
    ids, lps = out.top_logprobs[0]
    assert ids == logits[0, :V].topk(3).indices.tolist()
    assert lps == sorted(lps, reverse=True) and len(lps) == 3
    assert out.top_logprobs[1] is None


def test_plain_greedy_batches_take_the_device_path_and_agree_with_the_general_one():
    """All-greedy batches skip the host copy of the logits; the result equals the general path's, ids and logprobs."""
    from proto import pb
    from worker.sampler import Sampler, SamplingState

    logits = torch.randn(5, 300, generator=torch.Generator().manual_seed(7)) * 4
    plain = [SamplingState(f"r{i}", pb.SamplingParams(temperature=0, num_logprobs=i % 3), [1], [2]) for i in range(5)]
    # One row with a bias forces the general path for the whole batch; a zero-effect bias keeps the values equal.
    biased = plain[:4] + [SamplingState("b", pb.SamplingParams(temperature=0, logit_bias={299: 0.0}), [1], [2])]
    assert all(st.is_plain_greedy for st in plain) and not biased[4].is_plain_greedy
    fast, general = Sampler(300).sample(logits, plain), Sampler(300).sample(logits, biased)
    assert fast.token_ids == general.token_ids == logits.argmax(-1).tolist()
    assert fast.logprobs == pytest.approx(general.logprobs, abs=1e-6)
    assert fast.top_logprobs[:4] == general.top_logprobs[:4] and fast.top_logprobs[1] is not None


def test_a_top_p_neighbour_leaves_an_unfiltered_row_whole():
    # float32 cumulative sums over a large vocabulary pass 1.0 at the tail; a row without top_p must not lose those
    # tokens because the batch also holds a row with one (its distribution, hence its seeded tokens, would change).
    vocab = 5000
    logits = torch.randn(1, vocab, generator=torch.Generator().manual_seed(0)) * 3
    plain = state(temperature=1.0, top_p=1.0, seed=7, has_seed=True)
    alone = _filter(logits.clone(), [plain])
    batched = _filter(logits.repeat(2, 1), [plain, state(temperature=1.0, top_p=0.5)])
    assert bool((alone[0] > 0).all()) and torch.equal(batched[0], alone[0])
    assert 0 < int((batched[1] > 0).sum()) < vocab


def test_strongest_repetition_penalty_stays_finite():
    # The least positive float32 penalty (what a gateway sends for any smaller one) divides positive logits by
    # 1e-38: clamped to float32's largest value, not inf (whose softmax is NaN, always read as the first such id),
    # so sampling still draws among the prompt's tokens.
    logits = torch.full((1, V), -1.0)
    logits[0, 4], logits[0, 9], logits[0, 30] = 5.0, 6.0, 7.0
    penalty = dict(prompt=(4, 9), temperature=1.0, repetition_penalty=1.1754943508222875e-38, has_seed=True)
    picks = set()
    for seed in range(40):
        out = Sampler(V).sample(logits.clone(), [state(**penalty, seed=seed)])
        assert math.isfinite(out.logprobs[0])
        assert out.logprobs[0] == pytest.approx(logits[0].log_softmax(-1)[out.token_ids[0]].item())
        picks.add(out.token_ids[0])
    assert picks == {4, 9}
