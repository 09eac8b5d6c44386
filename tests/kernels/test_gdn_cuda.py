"""GPU tests: the Gated DeltaNet CUDA kernels (kernels/gdn/ops.py) against the plain-torch oracle (naive.py).

Fresh random inputs each test; outputs NaN-poisoned before the call; state slots not contiguous; unused slots
poisoned with NaN and checked untouched. Tolerances (issue 6): relative error < 1e-3 with f32 state,
< 1e-2 with bf16 state, measured with float32 outputs against the float32 oracle.
"""
import pytest
import torch
import torch.nn.functional as F

from kernels.gdn import naive

pytestmark = pytest.mark.gpu

K = 128
TOL = {torch.float32: 1e-3, torch.bfloat16: 1e-2}
STATE_IDS = {torch.float32: "f32state", torch.bfloat16: "bf16state"}


def rel(x, ref) -> float:
    x, ref = x.double(), ref.double()
    assert torch.isfinite(x).all(), "non-finite values (unwritten output?)"
    return float((x - ref).norm() / ref.norm())


def layer(num_k_heads, num_v_heads, device="cuda"):
    """Random per-layer parameters: A_log, dt_bias [HV] f32, conv weight [C, 4] bf16."""
    conv_dim = (2 * num_k_heads + num_v_heads) * K
    A_log = torch.empty(num_v_heads, device=device).uniform_(0.0, 2.5).log()
    dt_bias = torch.randn(num_v_heads, device=device) * 0.5
    weight = (torch.randn(conv_dim, 4, device=device) * 0.5).bfloat16()
    return A_log, dt_bias, weight


def tokens(num_tokens, num_k_heads, num_v_heads, device="cuda"):
    """Random q, k [T, H, K], v [T, HV, V], raw gates a, b [T, HV], all bf16."""
    q = torch.randn(num_tokens, num_k_heads, K, device=device).bfloat16()
    k = torch.randn(num_tokens, num_k_heads, K, device=device).bfloat16()
    v = torch.randn(num_tokens, num_v_heads, K, device=device).bfloat16()
    a = torch.randn(num_tokens, num_v_heads, device=device).bfloat16()
    b = (torch.randn(num_tokens, num_v_heads, device=device) * 2).bfloat16()
    return q, k, v, a, b


def gates(a, b, A_log, dt_bias):
    """g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b), in f32 (model-spec 1.7)."""
    return -A_log.exp() * F.softplus(a.float() + dt_bias), torch.sigmoid(b.float())


def pool_with(slots, num_slots, num_v_heads, dtype):
    """State pool [S, HV, K, V]: random O(0.3) values in `slots`, NaN elsewhere."""
    pool = torch.full((num_slots, num_v_heads, K, K), float("nan"), device="cuda", dtype=dtype)
    pool[slots] = (torch.randn(len(slots), num_v_heads, K, K, device="cuda") * 0.3).to(dtype)
    return pool


def check_untouched(pool, slots):
    others = [s for s in range(pool.shape[0]) if s not in set(slots)]
    assert torch.isnan(pool[others].float()).all(), "a slot outside slot_ids was written"


@pytest.mark.parametrize("state_dtype", [torch.float32, torch.bfloat16], ids=STATE_IDS.get)
@pytest.mark.parametrize("heads", [(4, 12), (16, 48)], ids=["H4_HV12", "H16_HV48"])
def test_decode_matches_recurrence(state_dtype, heads):
    from kernels.gdn import ops

    num_k_heads, num_v_heads = heads
    slots = [7, 2, 11, 0, 5]
    pool = pool_with(slots, 13, num_v_heads, state_dtype)
    A_log, dt_bias, _ = layer(num_k_heads, num_v_heads)
    q, k, v, a, b = tokens(len(slots), num_k_heads, num_v_heads)
    g, beta = gates(a, b, A_log, dt_bias)
    init = pool[slots].float()
    cu = torch.arange(len(slots) + 1, device="cuda")
    ref_o, ref_s = naive.recurrent_gated_delta_rule(q.float(), k.float(), v.float(), g, beta,
                                                    initial_state=init, cu_seqlens=cu)
    out = torch.full((len(slots), num_v_heads, K), float("nan"), device="cuda")
    slot_ids = torch.tensor(slots, dtype=torch.int32, device="cuda")
    ops.fused_recurrent_decode(q, k, v, a, b, A_log, dt_bias, pool, slot_ids, out=out)
    tol = TOL[state_dtype]
    assert rel(out, ref_o) < tol
    assert rel(pool[slots], ref_s) < tol
    check_untouched(pool, slots)


DECODE_CASES = [(torch.bfloat16, "regs"), (torch.bfloat16, "narrow"), (torch.bfloat16, "t128x6"), (torch.bfloat16, "w128"), (torch.bfloat16, "cp128"),
                (torch.bfloat16, "cp256"), (torch.float32, "cp128"), (torch.float32, "cp256"),
                (torch.bfloat16, "tma3x2"), (torch.bfloat16, "tma6x1"), (torch.bfloat16, "tma3x1"),
                (torch.float32, "tma3x1"), (torch.bfloat16, "tma3x2a")]


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16], ids=["f32out", "bf16out"])
@pytest.mark.parametrize("state_dtype,variant", DECODE_CASES, ids=lambda x: STATE_IDS.get(x, x))
def test_decode_variant_matches_recurrence(state_dtype, variant, out_dtype):
    """Every decode kernel variant on the 27B layer shape: against the oracle (1e-2 bf16 state, 1e-3 f32;
    outputs 2e-2 when bf16), against the "regs" kernel on the same inputs, a padding row (slot -1) left
    unwritten, slots not contiguous, other slots untouched."""
    from kernels.gdn import ops

    num_k_heads, num_v_heads = 16, 48
    slots = [7, 2, 11, 0, 5, 12, 3, 9, 1]
    ids = slots[:3] + [-1] + slots[3:]
    pool = pool_with(slots, 14, num_v_heads, state_dtype)
    twin = pool.clone()
    A_log, dt_bias, _ = layer(num_k_heads, num_v_heads)
    q, k, v, a, b = tokens(len(ids), num_k_heads, num_v_heads)
    g, beta = gates(a, b, A_log, dt_bias)
    live = [i for i, s in enumerate(ids) if s >= 0]
    cu = torch.arange(len(live) + 1, device="cuda")
    ref_o, ref_s = naive.recurrent_gated_delta_rule(q[live].float(), k[live].float(), v[live].float(), g[live],
                                                    beta[live], initial_state=pool[slots].float(), cu_seqlens=cu)
    slot_ids = torch.tensor(ids, dtype=torch.int32, device="cuda")
    out = torch.full((len(ids), num_v_heads, K), float("nan"), device="cuda", dtype=out_dtype)
    ops.fused_recurrent_decode(q, k, v, a, b, A_log, dt_bias, pool, slot_ids, out=out, variant=variant)
    tol = 2e-2 if out_dtype == torch.bfloat16 else TOL[state_dtype]  # bf16 rounding alone is ~1.5e-3
    assert rel(out[live].float(), ref_o) < tol
    assert rel(pool[slots], ref_s) < TOL[state_dtype]
    assert torch.isnan(out[3].float()).all(), "the padding row (slot -1) was written"
    check_untouched(pool, slots)
    out_regs = torch.full_like(out, float("nan"))
    ops.fused_recurrent_decode(q, k, v, a, b, A_log, dt_bias, twin, slot_ids, out=out_regs, variant="regs")
    assert rel(out[live].float(), out_regs[live].float()) < 1e-3
    assert rel(pool[slots].float(), twin[slots].float()) < 1e-3


@pytest.mark.parametrize("state_dtype,variant", [(torch.bfloat16, "tma3x2"), (torch.bfloat16, "tma6x1"),
                                                   (torch.float32, "tma3x1"), (torch.bfloat16, "tma3x2a")], ids=lambda x: STATE_IDS.get(x, x))
def test_decode_tma_ring_wraps(state_dtype, variant):
    """The persistent TMA decode with many more items than blocks (each block's stage ring wraps several times),
    padding rows (slot -1) scattered, including a block's first and last items: against the oracle, padding
    rows unwritten, other slots untouched."""
    from kernels.gdn import ops

    num_k_heads, num_v_heads, num_seqs = 16, 48, 75
    slots = torch.randperm(90)[:num_seqs].tolist()
    ids = [-1 if i % 7 in (0, 4) else s for i, s in enumerate(slots)]
    live = [i for i, s in enumerate(ids) if s >= 0]
    used = [ids[i] for i in live]
    pool = pool_with(used, 90, num_v_heads, state_dtype)
    A_log, dt_bias, _ = layer(num_k_heads, num_v_heads)
    q, k, v, a, b = tokens(num_seqs, num_k_heads, num_v_heads)
    g, beta = gates(a, b, A_log, dt_bias)
    cu = torch.arange(len(live) + 1, device="cuda")
    ref_o, ref_s = naive.recurrent_gated_delta_rule(q[live].float(), k[live].float(), v[live].float(), g[live],
                                                    beta[live], initial_state=pool[used].float(), cu_seqlens=cu)
    out = torch.full((num_seqs, num_v_heads, K), float("nan"), device="cuda")
    slot_ids = torch.tensor(ids, dtype=torch.int32, device="cuda")
    ops.fused_recurrent_decode(q, k, v, a, b, A_log, dt_bias, pool, slot_ids, out=out, variant=variant)
    assert rel(out[live], ref_o) < TOL[state_dtype]
    assert rel(pool[used], ref_s) < TOL[state_dtype]
    pad = [i for i, s in enumerate(ids) if s < 0]
    assert torch.isnan(out[pad]).all(), "a padding row (slot -1) was written"
    check_untouched(pool, used)


@pytest.mark.parametrize("prep_splits", [1, 2, 3])
@pytest.mark.parametrize("state_dtype", [torch.float32, torch.bfloat16], ids=STATE_IDS.get)
def test_chunk_varlen_matches_recurrence(state_dtype, prep_splits, monkeypatch):
    """The chunked prefill against the token-by-token recurrence, gdn_chunk_prep's value heads in 1, 2 or 3 blocks a
    (chunk, key head); the output NaN first."""
    from kernels.gdn import _launch, ops

    monkeypatch.setattr(_launch, "PREP_SPLITS", prep_splits)

    num_k_heads, num_v_heads, lens = 2, 6, [1, 63, 64, 65, 1000]
    slots = [9, 3, 0, 6, 4]
    pool = pool_with(slots, 10, num_v_heads, state_dtype)
    A_log, dt_bias, _ = layer(num_k_heads, num_v_heads)
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    q, k, v, a, b = tokens(cu[-1], num_k_heads, num_v_heads)
    g, beta = gates(a, b, A_log, dt_bias)
    has_init = torch.tensor([1, 1, 0, 1, 1], dtype=torch.int32, device="cuda")
    init = pool[slots].float() * has_init.float()[:, None, None, None]
    ref_o, ref_s = naive.recurrent_gated_delta_rule(q.float(), k.float(), v.float(), g, beta, initial_state=init,
                                                    cu_seqlens=torch.tensor(cu, device="cuda"))
    out = torch.full((cu[-1], num_v_heads, K), float("nan"), device="cuda")
    slot_ids = torch.tensor(slots, dtype=torch.int32, device="cuda")
    ops.chunk_prefill(q, k, v, a, b, A_log, dt_bias, pool, slot_ids, cu, has_initial_state=has_init, out=out)
    tol = TOL[state_dtype]
    for n in range(len(lens)):
        lo, hi = cu[n], cu[n + 1]
        assert rel(out[lo:hi], ref_o[lo:hi]) < tol, f"output of sequence {n} (length {lens[n]})"
        assert rel(pool[slots[n]], ref_s[n]) < tol, f"final state of sequence {n} (length {lens[n]})"
    check_untouched(pool, slots)


def test_prefill_then_decode_equals_long_prefill():
    from kernels.gdn import ops

    num_k_heads, num_v_heads, total, split = 4, 12, 200, 131
    A_log, dt_bias, _ = layer(num_k_heads, num_v_heads)
    q, k, v, a, b = tokens(total, num_k_heads, num_v_heads)
    pool = pool_with([1, 4], 6, num_v_heads, torch.float32)
    pool[4] = pool[1]
    long_out = torch.full((total, num_v_heads, K), float("nan"), device="cuda")
    one = torch.tensor([1], dtype=torch.int32, device="cuda")
    ops.chunk_prefill(q, k, v, a, b, A_log, dt_bias, pool, one, [0, total], out=long_out)
    other = torch.tensor([4], dtype=torch.int32, device="cuda")
    steps = torch.full((total, num_v_heads, K), float("nan"), device="cuda")
    ops.chunk_prefill(q[:split], k[:split], v[:split], a[:split], b[:split], A_log, dt_bias, pool, other,
                      [0, split], out=steps[:split])
    for t in range(split, total):
        ops.fused_recurrent_decode(q[t:t + 1], k[t:t + 1], v[t:t + 1], a[t:t + 1], b[t:t + 1], A_log, dt_bias,
                                   pool, other, out=steps[t:t + 1])
    assert rel(steps, long_out) < 1e-3
    assert rel(pool[4], pool[1]) < 1e-3


@pytest.mark.parametrize("pieces", [1, 4, 16])
@pytest.mark.parametrize("conv_dtype", [torch.float32, torch.bfloat16], ids=["f32conv", "bf16conv"])
def test_conv_prefill_then_decode(conv_dtype, pieces, monkeypatch):
    """Every piece count of gdn_conv_prefill (a chunk cut into pieces of at least KC - 1 tokens) against the naive
    conv, over lengths around the chunk and piece edges, fresh and continued sequences; y's memory NaN first."""
    from kernels.gdn import _launch, ops

    monkeypatch.setattr(_launch, "CONV_PIECES", pieces)
    lens, slots = [1, 2, 5, 7, 63, 64, 65, 300], [5, 0, 3, 8, 2, 6, 1, 7]
    has_init = [1, 0, 1, 0, 1, 1, 0, 1]
    _, _, weight = layer(2, 6)
    channels = weight.shape[0]
    conv_pool = torch.full((9, channels, 3), float("nan"), device="cuda", dtype=conv_dtype)
    conv_pool[slots] = torch.randn(len(slots), channels, 3, device="cuda").bfloat16().to(conv_dtype)
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    x = torch.randn(cu[-1], channels, device="cuda").bfloat16()
    init = conv_pool[slots].clone() * torch.tensor(has_init, device="cuda").view(-1, 1, 1).to(conv_dtype)
    ref_y, ref_state = naive.causal_conv1d(x, weight, init, torch.tensor(cu, device="cuda"))
    slot_ids = torch.tensor(slots, dtype=torch.int32, device="cuda")
    del init
    torch.full_like(x, float("nan"))  # freed at once: conv_prefill's y reuses the NaN block from the allocator
    y = ops.conv_prefill(x, weight, conv_pool, slot_ids, cu, has_initial_state=has_init)
    assert not y.isnan().any()
    assert rel(y, ref_y.float()) < 1e-2
    assert torch.equal(conv_pool[slots], ref_state)
    x1 = torch.randn(len(slots), channels, device="cuda").bfloat16()
    ref_y1, ref_state1 = naive.causal_conv1d(x1, weight, ref_state, torch.arange(len(slots) + 1, device="cuda"))
    y1 = ops.conv_decode(x1, weight, conv_pool, slot_ids)
    assert rel(y1, ref_y1.float()) < 1e-2
    assert torch.equal(conv_pool[slots], ref_state1)
    check_untouched(conv_pool, slots)


def test_layer_prefill_then_decode_default_bf16_output():
    """gdn_prefill + gdn_decode (conv + recurrence, bf16 outputs, bf16 pools) against the oracle chain."""
    from kernels.gdn import ops

    num_k_heads, num_v_heads, lens, slots = 2, 4, [70, 5], [3, 1]
    A_log, dt_bias, weight = layer(num_k_heads, num_v_heads)
    channels = weight.shape[0]
    state = pool_with(slots, 4, num_v_heads, torch.bfloat16)
    conv = torch.randn(4, channels, 3, device="cuda").bfloat16()
    init_s, init_c = state[slots].float(), conv[slots].clone()
    cu = torch.tensor([0, 70, 75], device="cuda")
    x = torch.randn(75, channels, device="cuda").bfloat16()
    _, _, _, a, b = tokens(75, num_k_heads, num_v_heads)
    slot_ids = torch.tensor(slots, dtype=torch.int32, device="cuda")
    o = ops.gdn_prefill(x, a, b, weight, A_log, dt_bias, conv, state, slot_ids, cu, num_k_heads)
    y, ref_c = naive.causal_conv1d(x, weight, init_c, cu)
    key = num_k_heads * K
    q, k, v = y[:, :key].unflatten(1, (num_k_heads, K)), y[:, key:2 * key].unflatten(1, (num_k_heads, K)), \
        y[:, 2 * key:].unflatten(1, (num_v_heads, K))
    g, beta = gates(a, b, A_log, dt_bias)
    ref_o, ref_s = naive.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=init_s, cu_seqlens=cu)
    assert rel(o, ref_o.float()) < 2e-2
    assert torch.equal(conv[slots], ref_c)
    x1 = torch.randn(2, channels, device="cuda").bfloat16()
    _, _, _, a1, b1 = tokens(2, num_k_heads, num_v_heads)
    o1 = ops.gdn_decode(x1, a1, b1, weight, A_log, dt_bias, conv, state, slot_ids, num_k_heads)
    y1, _ = naive.causal_conv1d(x1, weight, ref_c, torch.arange(3, device="cuda"))
    q1, k1, v1 = y1[:, :key].unflatten(1, (num_k_heads, K)), y1[:, key:2 * key].unflatten(1, (num_k_heads, K)), \
        y1[:, 2 * key:].unflatten(1, (num_v_heads, K))
    g1, beta1 = gates(a1, b1, A_log, dt_bias)
    ref_o1, _ = naive.recurrent_gated_delta_rule(q1, k1, v1, g1, beta1, initial_state=ref_s,
                                                 cu_seqlens=torch.arange(3, device="cuda"))
    assert rel(o1, ref_o1.float()) < 2e-2
