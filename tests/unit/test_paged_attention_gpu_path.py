"""Unit tests (CPU): the GPU forward's plumbing (row split, gathers/scatters, slot ids, prefill tables) with the
GDN CUDA kernels replaced by plain-torch stand-ins of the same signature, against the reference forward."""
import copy
import random

import pytest
import torch
import torch.nn.functional as F

from kernels.gdn import naive
from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.layers import gdn as gdn_layer
from worker.layers import gdn_meta
from worker.layers.gdn_meta import GdnStepMeta
from worker.layers.paged_attention import PagedStepMeta
from worker.loader import load_model
from worker.models.qwen3_5 import StepInputs
from worker.tiny import write_tiny_checkpoint


def _core(mixed, a, b, conv_w, a_log, dt_bias, conv_pool, state_pool, slot_ids, cu, init, num_k_heads, op):
    """What the kernels compute, in plain torch: conv with state, gates, delta rule; pools updated at slots."""
    slots = slot_ids.long()
    keep = init.to(mixed.dtype)
    y, new_conv = naive.causal_conv1d(mixed, conv_w, conv_pool[slots] * keep[:, None, None], cu)
    conv_pool[slots] = new_conv.to(conv_pool.dtype)
    head = state_pool.shape[-1]
    key_dim = num_k_heads * head
    q = y[:, :key_dim].unflatten(1, (num_k_heads, head))
    k = y[:, key_dim:2 * key_dim].unflatten(1, (num_k_heads, head))
    v = y[:, 2 * key_dim:].unflatten(1, (-1, head))
    g = -a_log.exp() * F.softplus(a.float() + dt_bias)
    o, final = op(q, k, v, g, b.sigmoid(), initial_state=state_pool[slots] * keep[:, None, None, None],
                  cu_seqlens=cu)
    state_pool[slots] = final.to(state_pool.dtype)
    return o


def fake_decode(mixed, a, b, conv_w, a_log, dt_bias, conv_pool, state_pool, slot_ids, num_k_heads):
    n = mixed.shape[0]
    return _core(mixed, a, b, conv_w, a_log, dt_bias, conv_pool, state_pool, slot_ids, torch.arange(n + 1),
                 torch.ones(n), num_k_heads, naive.recurrent_gated_delta_rule)


def fake_prefill(mixed, a, b, conv_w, a_log, dt_bias, conv_pool, state_pool, slot_ids, cu, num_k_heads,
                 has_initial_state=None, tables=None):
    assert tables is not None and tables[2] == sum(-(-int(n) // 64) for n in (cu[1:] - cu[:-1]).tolist())
    return _core(mixed, a, b, conv_w, a_log, dt_bias, conv_pool, state_pool, slot_ids, cu, has_initial_state,
                 num_k_heads, naive.chunk_gated_delta_rule)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tiny"))
    write_tiny_checkpoint(path)
    return load_model(path, dtype=torch.float32, progress=False)


# chunked False: mixed steps split their decode rows out (gathered, or row views where they lead the step, through
# the step's DecodePlan on CUDA), as past MIXED_CHUNKED_MAX_DECODE decode rows; the stand-ins run them here.
@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "split"])
@pytest.mark.parametrize("fused", [False, True], ids=["separate", "fused_projections"])
def test_kernel_path_plumbing_equals_reference(tiny, monkeypatch, fused, chunked):
    model, config = tiny
    monkeypatch.setattr(gdn_meta, "MIXED_STEPS_CHUNKED", chunked)
    gpu_model = copy.deepcopy(model)
    if fused:
        assert gpu_model.fuse_projections() == config.num_hidden_layers
    monkeypatch.setattr(gdn_layer.GatedDeltaNet, "uses_kernels", lambda self, x: True)
    monkeypatch.setattr(gdn_layer.gdn_ops, "gdn_decode", fake_decode)
    monkeypatch.setattr(gdn_layer.gdn_ops, "gdn_prefill", fake_prefill)
    block_size, rng = 8, random.Random(2)
    caches = [ModelCache(config, 64, block_size, 8, dtype=torch.float32) for _ in range(2)]
    ids = {n: torch.randint(0, config.vocab_size, (90,), generator=torch.Generator().manual_seed(n)).tolist()
           for n in range(3)}
    free = rng.sample(range(64), 64)
    blocks = {n: [free.pop() for _ in range(12)] for n in ids}
    slots = {0: 5, 1: 1, 2: 3}
    steps = [[(0, 0, 70), (1, 0, 1)], [(1, 1, 2), (2, 0, 20), (0, 70, 71)], [(2, 20, 21), (0, 71, 72)],
             [(0, 72, 73), (1, 2, 3), (2, 21, 40)]]
    for step in steps:
        batch = ForwardBatch.from_rows([(ids[n][lo:hi], lo, slots[n], blocks[n], True) for n, lo, hi in step],
                                       block_size)
        want = model(batch, caches[0])
        caches[1].reset_slots(batch.state_slots[batch.context_lens == 0])
        bounds, ctx = batch.cu_seqlens.tolist(), batch.context_lens.tolist()
        cos, sin = model.rotary.cos_sin(batch.positions, torch.float32)
        inputs = StepInputs(batch.input_ids, cos, sin, PagedStepMeta.from_batch(batch, block_size, bounds, ctx),
                            GdnStepMeta.from_lists(bounds, ctx, batch.state_slots.tolist(), "cpu"),
                            batch.cu_seqlens, batch.state_slots)
        assert chunked or inputs.gdn.all_decode or inputs.gdn.num_leading_decode == (2 if step is steps[-1] else 0)
        got = gpu_model.run(inputs, caches[1], batch.last_token_index())
        torch.testing.assert_close(got, want, atol=2e-4, rtol=2e-4)
    torch.testing.assert_close(caches[1].recurrent_state, caches[0].recurrent_state, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(caches[1].conv_state, caches[0].conv_state)


def test_fused_projections_give_the_same_layer_outputs(tiny):
    model, config = tiny
    fused = copy.deepcopy(model)
    assert fused.fuse_projections() == config.num_hidden_layers
    assert fused.layers[0].mixer.in_proj_qkv is None and fused.layers[3].mixer.q_proj is None
    assert fused.layers[0].mlp.gate_proj is None and fused.layers[0].mlp.gate_up_proj is not None
    batch = ForwardBatch.from_rows([(list(range(3, 40)), 0, 2, [4, 1, 6], True), ([7], 0, 0, [0], True)], 16)
    want = model(batch, ModelCache(config, 8, 16, 4, dtype=torch.float32), all_logits=True)
    got = fused(batch, ModelCache(config, 8, 16, 4, dtype=torch.float32), all_logits=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_fused_nvfp4_projection_splits_back_into_its_shards():
    from kernels.nvfp4 import checkpoint
    from worker.layers.fused import fuse_linears
    from worker.layers.linear import Linear

    gen = torch.Generator().manual_seed(4)
    shards = []
    for rows, gmul in ((64, 0.01), (32, 0.3), (16, 2.0)):
        packed = torch.randint(0, 256, (rows, 64), dtype=torch.uint8, generator=gen)
        scale = (torch.rand(rows, 8, generator=gen) + 0.5).to(torch.float8_e4m3fn)
        shards.append(Linear(checkpoint.NVFP4Weight(packed, scale, torch.tensor(gmul))))
    x = torch.randn(5, 128, generator=gen)
    fused = fuse_linears(shards)
    assert fused.nvfp4 is not None
    for got, shard in zip(torch.split(fused(x), [64, 32, 16], dim=-1), shards):
        torch.testing.assert_close(got, shard(x))
    assert fuse_linears([shards[0], Linear(torch.randn(8, 128))]) is None
