"""Unit tests (CPU): the piecewise step of worker/prefill_graphs.py (per-token pieces on padded static buffers, the
mixers' cores eagerly between them) equals model.forward: logits and every cache write, for fresh prompts, a
prefill chunk with context, and mixed steps. On the GPU the same pieces are CUDA graphs
(tests/kernels/test_prefill_graphs_gpu.py)."""
import pytest
import torch

from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.loader import load_model
from worker.prefill_graphs import MIN_TOKENS, SIZES, PrefillGraphs, same_kinds
from worker.tiny import write_tiny_checkpoint

BLOCK = 16


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tiny"))
    write_tiny_checkpoint(path)
    return load_model(path, dtype=torch.float32, progress=False)


def _cache(config):
    cache = ModelCache(config, num_blocks=64, block_size=BLOCK, num_slots=8, device="cpu", dtype=torch.float32)
    gen = torch.Generator().manual_seed(3)
    for pool in _pool_list(cache):
        pool.copy_(torch.randn(pool.shape, generator=gen))  # live state in other slots / blocks must survive
    return cache


def _tokens(n, vocab, seed):
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def _pool_list(cache):
    return list(cache.k_cache) + list(cache.v_cache) + list(cache.recurrent_state) + list(cache.conv_state)


def _pools(cache):
    return [p.clone() for p in _pool_list(cache)]


def _both(model, config, rows, steps=1):
    """Runs `rows` (from_rows tuples) through model.forward and through the eager pieces, each on its own copy of
    one cache; -> (logits, logits, pools, pools)."""
    want_cache, got_cache = _cache(config), _cache(config)
    pieces = PrefillGraphs(model, got_cache, capture=False, verbose=False)
    for _ in range(steps):
        want = model.forward(ForwardBatch.from_rows(rows, BLOCK), want_cache)
        got = pieces.forward(ForwardBatch.from_rows(rows, BLOCK))
    return want, got, _pools(want_cache), _pools(got_cache)


def _check(want, got, want_pools, got_pools):
    """Logits to 1e-5; the cache writes to 1e-4: the two paths order the f32 sums of the recurrent state's update
    differently, and on an AMD EPYC (no AVX-512; session 31) one element of 65,536 of the 2-token prompt's state
    differed by 1.8e-5 (relative 8.8e-5), where earlier sessions' machines met 1e-5. A wrong or missing
    write differs by O(1)."""
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for w, g in zip(want_pools, got_pools):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


def test_the_tiny_model_shares_static_buffers_per_layer_kind(tiny):
    model, _ = tiny
    assert same_kinds(model)
    assert MIN_TOKENS <= SIZES[0] and list(SIZES) == sorted(SIZES)


@pytest.mark.parametrize("length", [2, 7, 16, 17, 32, 45, 100])
def test_a_fresh_prompt_padded_to_its_size_equals_the_eager_step(tiny, length):
    model, config = tiny
    ids = _tokens(length, config.vocab_size, seed=length)
    rows = [(ids, 0, 2, list(range(-(-length // BLOCK))), True)]
    _check(*_both(model, config, rows))


def test_a_chunk_with_context_and_decode_rows_in_one_step_equals_the_eager_step(tiny):
    model, config = tiny
    chunk = _tokens(40, config.vocab_size, seed=1)
    rows = [([5], 30, 0, [0, 1], True), (chunk, 24, 3, [4, 5, 6, 7, 8], True), ([9], 7, 6, [10], True),
            (_tokens(19, config.vocab_size, seed=2), 0, 7, [12, 13], False)]
    _check(*_both(model, config, rows))


def test_a_short_chunk_beside_decode_rows_padded_to_eight_equals_the_eager_step(tiny):
    """The few new tokens of a prompt the prefix cache holds, beside decode rows (5 tokens: padded to P = 8, where
    the GEMMs are GEMVs); and one decode row alone, which the decode graphs did not take."""
    model, config = tiny
    pieces = PrefillGraphs(model, _cache(config), capture=False, verbose=False)
    assert pieces.serves(1) and pieces.serves(5) and min(s for s in SIZES if s >= 5) == 8
    rows = [([5], 30, 0, [0, 1], True), (_tokens(3, config.vocab_size, seed=7), 40, 3, [4, 5, 6], True),
            ([9], 7, 6, [10], True)]
    _check(*_both(model, config, rows))
    _check(*_both(model, config, [([11], 45, 2, [20, 21, 22], True)]))


def test_two_steps_in_a_row_reuse_the_buffers_without_leaking_state(tiny):
    """The second step of the same rows reads the first one's cache writes: the padding rows and stale buffers of
    the first step must not change it."""
    model, config = tiny
    rows = [(_tokens(50, config.vocab_size, seed=4), 0, 1, [20, 21, 22, 23], True),
            (_tokens(21, config.vocab_size, seed=5), 0, 4, [30, 31], True)]
    _check(*_both(model, config, rows, steps=2))


def test_more_tokens_than_the_largest_size_is_a_value_error(tiny):
    model, config = tiny
    pieces = PrefillGraphs(model, _cache(config), capture=False, verbose=False)
    n = SIZES[-1] + 1
    assert not pieces.serves(n) and pieces.serves(SIZES[-1]) and not pieces.serves(MIN_TOKENS - 1)
    with pytest.raises(ValueError, match="at most"):
        pieces.forward(ForwardBatch.from_rows([(_tokens(n, config.vocab_size, 6), 0, 0, list(range(n // BLOCK + 1)),
                                                True)], BLOCK))
