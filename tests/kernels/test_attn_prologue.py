"""kernels/attention/prologue.cu against the torch code it replaces (worker/layers/attention.GatedAttention._prologue
and `out * sigmoid(gate)`), fresh random inputs, NaN-poisoned outputs and pools: head dims 64 / 128 / 256 with their
rotary widths, 1 to 64 tokens, inputs as column views of a fused projection, non-contiguous pool slots, a padding
token (slot -1) that writes nothing, and a CUDA-graph replay after a kernel that lets dependents start early."""
import pytest
import torch

from kernels.attention import prologue
from kernels.norm import ops as norm_ops
from worker.layers.norm import RMSNorm
from worker.layers.rope import RotaryEmbedding

pytestmark = pytest.mark.gpu
EPS = 1e-6


def _case(tokens, heads, kv_heads, hd, rot, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, device="cuda", generator=g).to(torch.bfloat16)  # noqa: E731
    width = heads * 2 * hd + 2 * kv_heads * hd
    fused = rnd(tokens, width + 64) * 3  # a fused projection's output: q, k, v are column views of it
    qg = fused[:, :heads * 2 * hd].view(tokens, heads, 2 * hd)
    key = fused[:, heads * 2 * hd:heads * 2 * hd + kv_heads * hd]
    value = fused[:, heads * 2 * hd + kv_heads * hd:width]
    positions = torch.randint(0, 5000, (tokens,), device="cuda", generator=g)
    cos, sin = RotaryEmbedding(rot, 1e7).to("cuda").cos_sin(positions, torch.bfloat16)
    pool_slots = 4 * tokens + 8
    slots = torch.randperm(pool_slots, device="cuda", generator=g)[:tokens]
    return qg, key, value, rnd(hd) * 0.1, rnd(hd) * 0.1, cos, sin, slots, pool_slots


def _reference(qg, key, value, qw, kw, cos, sin, slots, k_pool, v_pool):
    tokens, hd = qg.shape[0], k_pool.shape[-1]
    q = RotaryEmbedding.apply(RMSNorm(qw, EPS)._norm(qg[..., :hd]), cos, sin)
    k = RotaryEmbedding.apply(RMSNorm(kw, EPS)._norm(key.reshape(tokens, -1, hd)), cos, sin)
    keep = slots >= 0
    k_pool[slots[keep]] = k[keep]
    v_pool[slots[keep]] = value.reshape(tokens, -1, hd)[keep]
    return q


def _assert_close(got, want):
    assert not got.isnan().any()
    torch.testing.assert_close(got.float(), want.float(), rtol=1.6e-2, atol=1.6e-2)
    assert (got == want).float().mean().item() > 0.98  # same rounding sequence: almost every value bit-equal


@pytest.mark.parametrize("tokens,heads,kv_heads,hd,rot", [
    (1, 24, 4, 256, 64), (7, 24, 4, 256, 64), (64, 24, 4, 256, 64), (5, 16, 2, 128, 32), (3, 8, 8, 64, 64),
    (9, 12, 3, 64, 16)], ids=str)
def test_prologue_matches_torch(tokens, heads, kv_heads, hd, rot):
    qg, key, value, qw, kw, cos, sin, slots, pool_slots = _case(tokens, heads, kv_heads, hd, rot, seed=tokens + hd)
    if tokens > 2:
        slots[1] = -1  # a padding token: its key and value go nowhere
    pools = [torch.full((pool_slots, kv_heads, hd), float("nan"), dtype=torch.bfloat16, device="cuda")
             for _ in range(4)]
    assert prologue.serves(qg, key, value, pools[0], rot)
    q = prologue.qk_norm_rope_cache(qg, key, value, qw, kw, EPS, cos, sin, slots, pools[0], pools[1])
    q_ref = _reference(qg, key, value, qw, kw, cos, sin, slots, pools[2], pools[3])
    _assert_close(q, q_ref)
    assert torch.equal(pools[1].isnan(), pools[3].isnan()) and torch.equal(pools[0].isnan(), pools[2].isnan())
    written = slots[slots >= 0]
    _assert_close(pools[0][written], pools[2][written])
    assert torch.equal(pools[1][written], pools[3][written])  # the value is copied bit for bit


@pytest.mark.parametrize("hd", [64, 256])
def test_gate_mul_matches_torch(hd):
    qg, *_ = _case(6, 8, 2, hd, 16, seed=hd)
    attn = torch.randn(6, 8, hd, device="cuda").to(torch.bfloat16)
    got = prologue.gate_mul(attn, qg)
    want = attn.reshape(6, -1) * torch.sigmoid(qg[..., hd:].reshape(6, -1))
    assert not got.isnan().any()
    torch.testing.assert_close(got.float(), want.float(), rtol=1.6e-2, atol=1e-3)
    assert (got == want).float().mean().item() > 0.99


def test_graph_replay_after_a_norm_kernel_reads_the_new_projection():
    qg, key, value, qw, kw, cos, sin, slots, pool_slots = _case(2, 24, 4, 256, 64, seed=7)
    raw, norm_w = torch.randn_like(qg, dtype=torch.float32).to(torch.bfloat16), torch.randn(512, device="cuda")
    norm_w = norm_w.to(torch.bfloat16)
    k_pool, v_pool = (torch.zeros(pool_slots, 4, 256, dtype=torch.bfloat16, device="cuda") for _ in range(2))

    def step():
        qg.copy_(norm_ops.rms_norm(raw, norm_w, EPS))  # rms_norm lets the next kernel launch at its start
        return prologue.qk_norm_rope_cache(qg, key, value, qw, kw, EPS, cos, sin, slots, k_pool, v_pool)

    step()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        q = step()
    for seed in range(3):
        raw.copy_(torch.randn(raw.shape, device="cuda", generator=torch.Generator(device="cuda").manual_seed(seed)))
        q.fill_(float("nan"))
        graph.replay()
        ref_pools = [torch.zeros_like(k_pool) for _ in range(2)]
        q_ref = _reference(norm_ops.rms_norm(raw, norm_w, EPS), key, value, qw, kw, cos, sin, slots, *ref_pools)
        _assert_close(q, q_ref)
