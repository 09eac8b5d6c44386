"""Unit tests (CPU): the vectorized paged-attention path (GPU path's metadata and decode attention) equals the
per-row reference, layer by layer and through the whole tiny model on a packed mixed batch."""
import random

import pytest
import torch
import torch.nn.functional as F

from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.layers import gdn_meta as gdn_layer
from worker.layers.gdn_meta import GdnStepMeta
from worker.layers.paged_attention import PagedStepMeta, decode_attention, decode_keys
from worker.loader import load_model
from worker.models.qwen3_5 import StepInputs
from worker.tiny import write_tiny_checkpoint


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tiny"))
    write_tiny_checkpoint(path)
    return load_model(path, dtype=torch.float32, progress=False)


def _reference(q, flat_k, flat_v, key_index, num_keys, scale):
    """Per row: SDPA over the row's first num_keys keys (GQA by repeat)."""
    out = []
    group = q.shape[1] // flat_k.shape[1]
    for r, n in enumerate(num_keys):
        k = flat_k[key_index[r, :n]].repeat_interleave(group, 1).transpose(0, 1)
        v = flat_v[key_index[r, :n]].repeat_interleave(group, 1).transpose(0, 1)
        out.append(F.scaled_dot_product_attention(q[r][:, None], k, v, scale=scale)[:, 0])
    return torch.stack(out)


@pytest.mark.parametrize("block_size", [16, 5], ids=["block16", "block5"])
def test_decode_attention_equals_per_row_sdpa(block_size):
    gen = torch.Generator().manual_seed(3)
    num_blocks, num_kv, head_dim, num_heads = 40, 2, 32, 6
    flat_k = torch.randn(num_blocks * block_size, num_kv, head_dim, generator=gen)
    flat_v = torch.randn(num_blocks * block_size, num_kv, head_dim, generator=gen)
    context_lens = [0, 37, 3, 60]
    perm = torch.randperm(num_blocks, generator=gen).tolist()
    tables = torch.full((4, 16), -1, dtype=torch.int64)
    for r, n in enumerate(context_lens):
        need = -(-(n + 1) // block_size)
        tables[r, :need] = torch.tensor([perm.pop() for _ in range(need)])
    key_index, key_valid = decode_keys(tables, [0, 1, 2, 3], context_lens, block_size, "cpu")
    assert key_index.shape[1] % block_size == 0 and key_valid.sum(1).tolist() == [n + 1 for n in context_lens]
    q = torch.randn(4, num_heads, head_dim, generator=gen)
    got = decode_attention(q, flat_k, flat_v, key_index, key_valid, 0.2)
    want = _reference(q, flat_k, flat_v, key_index, [n + 1 for n in context_lens], 0.2)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def _vectorized_step(model, batch, block_size):
    """The GPU path's StepInputs built on CPU tensors (GDN falls back to the plain-torch ops)."""
    bounds, ctx = batch.cu_seqlens.tolist(), batch.context_lens.tolist()
    cos, sin = model.rotary.cos_sin(batch.positions, model.embed_tokens.dtype)
    attn = PagedStepMeta.from_batch(batch, block_size, bounds, ctx)
    gdn = GdnStepMeta.from_lists(bounds, ctx, batch.state_slots.tolist(), "cpu")
    return StepInputs(batch.input_ids, cos, sin, attn, gdn, batch.cu_seqlens, batch.state_slots)


def test_packed_mixed_batch_vectorized_equals_reference(tiny):
    model, config = tiny
    block_size, rng = 8, random.Random(5)
    caches = [ModelCache(config, 48, block_size, 8, dtype=torch.float32) for _ in range(2)]
    ids = {n: torch.randint(0, config.vocab_size, (40,), generator=torch.Generator().manual_seed(n)).tolist()
           for n in range(4)}
    free = rng.sample(range(48), 48)
    blocks = {n: [free.pop() for _ in range(6)] for n in ids}
    slots = {0: 6, 1: 2, 2: 4, 3: 0}
    steps = [[(0, 0, 12), (1, 0, 9), (2, 0, 1)],
             [(1, 9, 10), (0, 12, 13), (3, 0, 17), (2, 1, 2)],
             [(2, 2, 3), (3, 17, 30), (0, 13, 14), (1, 10, 11)]]
    for step in steps:
        batch = ForwardBatch.from_rows([(ids[n][lo:hi], lo, slots[n], blocks[n], True) for n, lo, hi in step],
                                       block_size)
        want = model(batch, caches[0])
        caches[1].reset_slots(batch.state_slots[batch.context_lens == 0])
        inputs = _vectorized_step(model, batch, block_size)
        assert inputs.attn.all_decode == all(hi - lo == 1 for _, lo, hi in step)
        got = model.run(inputs, caches[1], batch.last_token_index())
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(caches[1].recurrent_state, caches[0].recurrent_state)
    torch.testing.assert_close(caches[1].k_cache[0], caches[0].k_cache[0])


def test_gdn_meta_splits_rows_by_kind(monkeypatch):
    monkeypatch.setattr(gdn_layer, "MIXED_STEPS_CHUNKED", False)
    meta = GdnStepMeta.from_lists([0, 5, 6, 9, 10], [0, 7, 2, 3], [3, 1, 7, 0], "cpu")
    assert meta.decode_tokens.tolist() == [5, 9] and meta.decode_slots.tolist() == [1, 0]
    assert meta.decode_slots.dtype == torch.int32
    assert meta.prefill_tokens.tolist() == [0, 1, 2, 3, 4, 6, 7, 8]
    assert meta.prefill_cu.tolist() == [0, 5, 8] and meta.prefill_slots.tolist() == [3, 7]
    assert meta.prefill_init.tolist() == [0, 1] and not meta.all_decode and not meta.all_prefill
    assert meta.num_leading_decode == 0  # decode rows 1 and 3: between prefill rows
    leading = GdnStepMeta.from_lists([0, 1, 2, 7, 10], [7, 3, 0, 4], [1, 0, 3, 7], "cpu")
    assert leading.num_leading_decode == 2 and leading.decode_tokens.tolist() == [0, 1]
    assert leading.prefill_tokens.tolist() == list(range(2, 10)) and leading.prefill_cu.tolist() == [0, 5, 8]


def test_gdn_meta_chunks_a_mixed_steps_few_decode_rows_with_its_prefill_rows():
    """Beside a row of 2+ tokens, up to MIXED_CHUNKED_MAX_DECODE one-token rows are one-token chunks continuing their
    slots (no gather / scatter); with more, the step splits them out to the decode kernels."""
    meta = GdnStepMeta.from_lists([0, 5, 6, 9, 10], [0, 7, 2, 3], [3, 1, 7, 0], "cpu")
    assert meta.all_prefill and not meta.all_decode and meta.decode_tokens.numel() == 0
    assert meta.prefill_tokens.tolist() == list(range(10)) and meta.prefill_cu.tolist() == [0, 5, 6, 9, 10]
    assert meta.prefill_slots.tolist() == [3, 1, 7, 0] and meta.prefill_init.tolist() == [0, 1, 1, 1]
    for many, prompt, chunked in ((gdn_layer.MIXED_CHUNKED_MAX_DECODE + 1, 4, False),
                                  (gdn_layer.MIXED_CHUNKED_MAX_DECODE, 2000, True)):
        bounds = [0, prompt] + [prompt + 1 + i for i in range(many)]
        meta = GdnStepMeta.from_lists(bounds, [0] + [9] * many, list(range(many + 1)), "cpu")
        assert meta.all_prefill == chunked and not meta.all_decode, (many, prompt)
        if not chunked:
            assert meta.decode_tokens.tolist() == list(range(prompt, prompt + many))
            assert meta.prefill_cu.tolist() == [0, prompt]
    decode_only = GdnStepMeta.from_lists([0, 1, 2], [5, 6], [0, 1], "cpu")
    assert decode_only.all_decode and decode_only.decode_tokens.tolist() == [0, 1]
