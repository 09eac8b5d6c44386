"""Unit tests (CPU): incremental decode, chunked prefill and packed mixed batches equal one full forward pass."""
import random

import pytest
import torch

from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.loader import load_model
from worker.tiny import write_tiny_checkpoint

TOL = 1e-4


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tiny"))
    write_tiny_checkpoint(path)
    return load_model(path, dtype=torch.float32, progress=False)


def _cache(config, block_size=16, num_blocks=64, num_slots=8):
    return ModelCache(config, num_blocks=num_blocks, block_size=block_size, num_slots=num_slots, device="cpu",
                      dtype=torch.float32)


def _tokens(n, vocab, seed):
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def _full_pass(model, config, ids, block_size=16):
    """[len(ids), V] logits of one fresh single-row pass."""
    cache = _cache(config, block_size)
    blocks = list(range(-(-len(ids) // block_size)))
    return model(ForwardBatch.from_rows([(ids, 0, 0, blocks, True)], block_size), cache, all_logits=True)


def _assert_close(got, want):
    err = ((got - want).abs().max() / want.abs().max()).item()
    assert err < TOL, f"max relative error {err:.2e}"


@pytest.mark.parametrize("block_size", [16, 5], ids=["block16", "block5"])
def test_prefill_40_then_24_decode_steps_equal_one_pass(tiny, block_size):
    model, config = tiny
    ids = _tokens(64, config.vocab_size, seed=10)
    full = _full_pass(model, config, ids)
    cache = _cache(config, block_size)
    blocks = random.Random(0).sample(range(cache.num_blocks), -(-64 // block_size))
    rows = [(ids[:40], 0, 5, blocks, True)] + [([ids[p]], p, 5, blocks, True) for p in range(40, 64)]
    got = [model(ForwardBatch.from_rows([row], block_size), cache) for row in rows]
    _assert_close(torch.cat(got), full[39:64])


def test_prefill_in_chunks_of_7_equals_one_pass(tiny):
    model, config = tiny
    ids = _tokens(64, config.vocab_size, seed=11)
    full = _full_pass(model, config, ids)
    cache = _cache(config)
    blocks = [9, 3, 30, 17]
    got = []
    for start in range(0, 64, 7):
        chunk = ids[start:start + 7]
        got.append(model(ForwardBatch.from_rows([(chunk, start, 3, blocks, True)], 16), cache, all_logits=True))
    _assert_close(torch.cat(got), full)


def test_output_shapes_and_logits_rows(tiny):
    model, config = tiny
    cache = _cache(config)
    rows = [(_tokens(5, config.vocab_size, 1), 0, 0, [0], False), (_tokens(3, config.vocab_size, 2), 0, 1, [1], True)]
    batch = ForwardBatch.from_rows(rows, 16)
    logits = model(batch, cache)
    assert logits.shape == (1, config.vocab_size) and logits.dtype == torch.float32
    _assert_close(logits, _full_pass(model, config, rows[1][0])[-1:])
    assert model(batch, _cache(config), all_logits=True).shape == (8, config.vocab_size)


# Per sequence: total tokens and the chunk sizes it is fed in, starting at the given step.
# B finishes at step 1; E then starts in B's (dirty) slot with B's blocks, proving the forward resets the slot.
SCHEDULE = {
    "A": (0, [30, 20, 1, 1, 18]),
    "B": (0, [23, 1]),
    "C": (1, [1, 1, 1, 1, 1, 1, 1, 1, 1]),
    "D": (0, [10, 1, 39]),
    "E": (2, [5, 1, 1, 12]),
}


def _plan_steps(rng):
    """list of steps; each step is a list of (seq name, start, end) in a shuffled row order."""
    steps = []
    for name, (first, chunks) in SCHEDULE.items():
        start = 0
        for i, size in enumerate(chunks):
            while len(steps) <= first + i:
                steps.append([])
            steps[first + i].append((name, start, start + size))
            start += size
    for step in steps:
        rng.shuffle(step)
    return steps


def test_packed_mixed_batch_gives_each_sequence_its_solo_logits(tiny):
    model, config = tiny
    rng = random.Random(7)
    seqs = {n: _tokens(sum(c), config.vocab_size, seed=20 + i) for i, (n, (_, c)) in enumerate(SCHEDULE.items())}
    solo = {n: _full_pass(model, config, ids) for n, ids in seqs.items()}
    cache = _cache(config, block_size=8, num_blocks=48, num_slots=8)
    free_blocks = rng.sample(range(48), 48)
    slots = {"A": 6, "B": 1, "C": 4, "D": 3, "E": 1}
    blocks = {n: [free_blocks.pop() for _ in range(-(-len(ids) // 8))] for n, ids in seqs.items() if n != "E"}
    blocks["E"] = blocks["B"][: -(-len(seqs["E"]) // 8)]
    checked = 0
    for step in _plan_steps(rng):
        want = [i % 3 != 2 for i in range(len(step))]
        rows = [(seqs[n][lo:hi], lo, slots[n], blocks[n], w) for (n, lo, hi), w in zip(step, want)]
        logits = model(ForwardBatch.from_rows(rows, 8), cache)
        expected = [solo[n][hi - 1] for (n, _, hi), w in zip(step, want) if w]
        assert logits.shape[0] == len(expected)
        _assert_close(logits, torch.stack(expected))
        checked += len(expected)
    assert checked >= 15


def test_fresh_row_resets_a_reused_slot(tiny):
    model, config = tiny
    ids = _tokens(20, config.vocab_size, seed=30)
    cache = _cache(config)
    cache.recurrent_state.normal_()
    cache.conv_state.normal_()
    logits = model(ForwardBatch.from_rows([(ids, 0, 2, [4, 8], True)], 16), cache, all_logits=True)
    _assert_close(logits, _full_pass(model, config, ids))
    assert cache.recurrent_state[:, 5].abs().sum() > 0, "other slots must be left alone"
