"""Unit tests: prompts with no `<|im_start|>` (raw completions) share the prefix cache on a grid of checkpoints, driven
by hand-made StepResults; the tiny model's bits in test_prefix_cache_model.py."""
from scheduler.prefix_cache import MIN_GRID_TOKENS, plan_grid
from tests.unit.test_prefix_cache import ANCHOR, cached_lengths, filler, make_scheduler, reference, serve
from tests.unit.test_scheduler import FakeWorker


def test_the_grid_step_is_min_tokens_in_whole_blocks_and_at_least_its_floor():
    assert plan_grid(700, 32, 16) == ([256, 512], (256, 512))
    assert plan_grid(1100, 300, 16) == ([304, 608, 912], (304, 912))
    assert plan_grid(MIN_GRID_TOKENS, 0, 16) == ([], ())


def test_a_repeated_raw_prompt_hits_the_cache():
    """A raw /v1/completions prompt has no `<|im_start|>`, so it never got a checkpoint: the same 700-token prompt sent
    again (a benchmark, a retry, a few-shot prefix) was prefilled from its first token, cached_tokens 0. Now its
    grid checkpoints (256 and 512 here) are cached and a repeat or a longer prompt starts from the longest one."""
    sched, worker = make_scheduler(), FakeWorker()
    raw = filler(5, 700)
    tokens, first = serve(sched, worker, "a", raw)
    assert first.num_cached_tokens == 0 and tokens == reference(raw)
    assert sorted(cached_lengths(sched)) == [256, 512]
    tokens, again = serve(sched, worker, "b", raw)
    assert again.num_cached_tokens == 512 and tokens == reference(raw)
    shared = raw[:300] + filler(6, 400)
    tokens, other = serve(sched, worker, "c", shared)
    assert other.num_cached_tokens == 256 and tokens == reference(shared)
    sched.self_check()


def test_an_anchored_prompt_does_not_start_from_a_grid_entry():
    """The raw prompt's 512-token entry was computed in grid chunks; a chat prompt that starts with the same tokens is
    chunked at its anchors, so it must not start from it (a hit gives a cold run's bits)."""
    sched, worker = make_scheduler(), FakeWorker()
    raw = filler(5, 700)
    serve(sched, worker, "raw", raw)
    anchored = raw + [ANCHOR] + filler(7, 20) + [ANCHOR, 801, 802]
    tokens, req = serve(sched, worker, "chat", anchored)
    assert req.num_cached_tokens == 0 and not req.checkpoint_grid
    assert tokens == reference(anchored)
