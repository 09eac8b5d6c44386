"""Unit tests: the sampler masks eos / stop ids while a request has generated fewer than min_tokens tokens."""
import torch

from proto import pb
from worker.sampler import Sampler, SamplingState

V = 50
EOS, STOP = 7, 9


def favouring_stops(rows: int) -> torch.Tensor:
    """Logits where eos is by far the best token and the stop id the second best."""
    logits = torch.zeros(rows, V)
    logits[:, EOS], logits[:, STOP], logits[:, 3] = 50.0, 40.0, 1.0
    return logits


def state(outputs=(), min_tokens=3, stop_ids=(EOS, STOP), **params):
    return SamplingState("r", pb.SamplingParams(min_tokens=min_tokens, **params), [1, 2], list(outputs),
                         min_tokens_stop_ids=tuple(stop_ids))


def test_eos_and_stop_ids_masked_until_min_tokens_then_allowed():
    sampler = Sampler(V)
    picked = [sampler.sample(favouring_stops(1), [state(outputs=[3] * n)]).token_ids[0] for n in range(5)]
    # Outputs 0, 1, 2 < min_tokens 3: neither stop id; from 3 generated tokens on eos wins again.
    assert picked == [3, 3, 3, EOS, EOS]


def test_mask_is_per_row_and_resumes_from_output_count():
    # A preempted request resumes with its output_token_ids: 3 already generated means no mask.
    rows = [state(outputs=[]), state(outputs=[3, 3, 3]), state(min_tokens=0), state(stop_ids=())]
    out = Sampler(V).sample(favouring_stops(4), rows)
    assert out.token_ids == [3, EOS, EOS, EOS]
    # Logprobs stay the model's (raw logits), not the masked ones.
    assert out.logprobs[0] == torch.log_softmax(favouring_stops(1), -1)[0, 3].item()


def test_sampled_rows_never_draw_masked_ids():
    rows = [state(outputs=[3], min_tokens=5, temperature=1.0)] * 300
    logits = torch.zeros(300, V)
    logits[:, EOS] = 8.0
    out = Sampler(V, seed=2).sample(logits, rows)
    assert EOS not in out.token_ids and len(set(out.token_ids)) > 10
    unmasked = Sampler(V, seed=2).sample(logits, [state(outputs=[3] * 5, min_tokens=5, temperature=1.0)] * 300)
    assert unmasked.token_ids.count(EOS) > 200


def test_stop_ids_outside_the_vocabulary_are_ignored():
    out = Sampler(V).sample(favouring_stops(1), [state(stop_ids=(EOS, STOP, V + 3))])
    assert out.token_ids == [3]


def test_a_grammar_that_allows_only_the_end_wins_over_min_tokens():
    """After a grammar completes, only eos is finite; masking it too would leave nothing to sample."""
    logits = torch.full((2, V), float("-inf"))
    logits[:, EOS] = 0.5
    rows = [state(outputs=[3], min_tokens=5), state(outputs=[3], min_tokens=5, temperature=1.0, seed=1, has_seed=True)]
    out = Sampler(V).sample(logits, rows)
    assert out.token_ids == [EOS, EOS]
