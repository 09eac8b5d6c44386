"""gemv_bt.cu (v12, block tiles, M = 1) against dequantize-then-f32-matmul on fresh random inputs and NaN-poisoned
outputs: fewer tiles than SMs (one tile a block), blocks of 1-19 tiles, tiles split over warps and tiles one warp
holds whole, Kc odd, K % 64 != 0, both unrolls, the +-0.5 codes, a PDL chain whose x is the previous y, CUDA-graph
replays, and ops.gemv's choice of it (needs a GPU)."""
import pytest
import torch

from kernels import _compile
from kernels.nvfp4 import gemv_bt, ops
from tests.kernels.test_nvfp4_bc import _chain, _half_codes, _weight

pytestmark = pytest.mark.gpu
REL_TOL = 1e-2


def _rel(p, ref_w, x, **kw) -> float:
    out = torch.full((1, p["N"]), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemv_bt.gemv_bt(x, p, out, **kw)
    ref = x.float() @ ref_w.t()
    assert not torch.isnan(out).any(), kw
    return ((out.float() - ref).norm() / ref.norm()).item()


# (300, 5120): 19 tiles, one a block; (2100, 5120): 136 tiles on 132 blocks (4 blocks with 2); (4000, 2000): K % 64 =
# 16, 16 pairs a tile; (40000, 5184): Kc = 81 (a padded last pair), 18-19 tiles a block; the rest: 27B shapes
@pytest.mark.parametrize("n,k", [(300, 5120), (2100, 5120), (4000, 2000), (40000, 5184), (6144, 5120), (5120, 17408),
                                 (17408, 5120)], ids=lambda v: str(v))
def test_block_tiles_gemv_matches(n, k):
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for unroll in gemv_bt.UNROLLS:
        x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
        assert _rel(p, ref_w, x, unroll=unroll) < REL_TOL, unroll


def test_half_codes_are_exact():
    n, k = 4096, 2048
    weight = _half_codes(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    x = (torch.randint(0, 2, (1, k), device="cuda") * 2 - 1).to(torch.bfloat16)
    out = torch.full((1, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemv_bt.gemv_bt(x, p, out)
    assert torch.equal(out.float(), x.float() @ ref_w.t())


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_pdl_chain(graph):
    # each launch's x is the previous launch's y (2048 x 2048: 128 blocks of one tile, 16 pairs, one a warp)
    _chain(lambda x, p, out: gemv_bt.gemv_bt(x, p, out, pdl=True), 1, graph)


def test_graph_replays_with_fresh_x():
    weight = _weight(17408, 5120)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    x = torch.randn(1, 5120, device="cuda").to(torch.bfloat16)
    out = torch.full((1, 17408), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemv_bt.gemv_bt(x, p, out, unroll=3)  # compile and build the scale words outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemv_bt.gemv_bt(x, p, out, unroll=3)
    for _ in range(3):
        x.copy_(torch.randn(1, 5120, device="cuda").to(torch.bfloat16))
        out.fill_(float("nan"))
        graph.replay()
        ref = x.float() @ ref_w.t()
        assert ((out.float() - ref).norm() / ref.norm()).item() < REL_TOL


def test_ops_gemv_takes_v12_where_tiles_balance():
    # 6144x5120: 384 tiles on 132 SMs (3 or 2 a block) -> gemv_bt on an H200 with PDL; 2100x5120: 136 tiles (2 or 1
    # a block, imbalance 1.94) -> not gemv_bt. Both right either way.
    sms = _compile.num_sms(torch.device("cuda"))
    hopper = torch.cuda.get_device_capability() == (9, 0) and ops.PDL and gemv_bt.GEMV_BT
    for n, want in ((6144, hopper and sms <= 384), (2100, False)):
        weight = _weight(n, 5120)
        ref_w, p = weight.dequantize(), ops.prepared(weight)
        x = torch.randn(1, 5120, device="cuda").to(torch.bfloat16)
        assert gemv_bt.serves(x, p) == (want and gemv_bt.imbalance(p, sms) <= gemv_bt.MAX_IMBALANCE), n
        out = torch.full((1, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        ops.gemv(x, p, out)
        ref = x.float() @ ref_w.t()
        assert ((out.float() - ref).norm() / ref.norm()).item() < REL_TOL, n


def test_refuses_what_it_does_not_serve():
    p = ops.prepared(_weight(4096, 256))  # 2 pairs a tile, 1-2 tiles a block: fewer pairs than warps
    out = torch.empty(1, 4096, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ValueError, match="K=256"):
        gemv_bt.gemv_bt(torch.randn(1, 256, device="cuda").to(torch.bfloat16), p, out)


SILU_TOL = 1e-3  # fused silu staging vs silu_mul + GEMV: a bf16 output ulp is 4e-3 relative, one x ulp ~1e-5 here


def _rel_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def _gate_up(k: int) -> tuple:
    """gate, up [1, k]: the two halves of one fused gate+up output row, values over silu's whole range."""
    both = (torch.randn(1, 2 * k, device="cuda") * 4.0).to(torch.bfloat16)
    return both[:, :k], both[:, k:]


# (5120, 17408): the 27B MLP down projection; (2048, 2048): one tile a block, 16 pairs; (4000, 2000): K % 64 = 16
@pytest.mark.parametrize("n,k", [(5120, 17408), (2048, 2048), (4000, 2000)], ids=lambda v: str(v))
def test_silu_x_equals_silu_mul_then_gemv(n, k):
    """The _silu entries stage bf16(bf16(silu(gate)) * up) themselves, rounded as kernels.norm.ops.silu_mul: within
    SILU_TOL of that kernel followed by the plain GEMV (expf may round its last bit differently where nvcc contracts
    it into a different context: a one-ulp x difference in a few of K inputs), and within REL_TOL of
    dequantize-then-f32-matmul."""
    from kernels.norm import ops as norm_ops

    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for unroll in gemv_bt.UNROLLS:
        gate, up = _gate_up(k)
        fused = torch.full((1, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemv_bt.gemv_bt(gate, p, fused, unroll=unroll, x_up=up)
        two = torch.full((1, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        h = norm_ops.silu_mul(gate, up)
        gemv_bt.gemv_bt(h, p, two, unroll=unroll)
        assert not torch.isnan(fused).any() and _rel_diff(fused, two) < SILU_TOL, unroll
        ref = (torch.nn.functional.silu(gate.float()).bfloat16() * up).float() @ ref_w.t()
        assert ((fused.float() - ref).norm() / ref.norm()).item() < REL_TOL, unroll


def test_mlp_down_projection_takes_the_silu_entry(monkeypatch):
    """MLP.forward at one row: the down projection's GEMV stages silu(gate) * up (no silu_mul launch, where gemv_bt
    serves: an H200 with PDL), and its output is the two-launch path's, bit for bit; 2 rows keep silu_mul."""
    from worker.layers import mlp as mlp_layer
    from worker.layers.linear import Linear

    d, i = 5120, 17408
    mlp = mlp_layer.MLP(Linear(_weight(i, d)), Linear(_weight(i, d)), Linear(_weight(d, i)))
    assert mlp.fuse_projections()
    calls = []
    silu_mul = mlp_layer.norm_ops.silu_mul
    monkeypatch.setattr(mlp_layer.norm_ops, "silu_mul", lambda g, u: (calls.append(g.shape[0]), silu_mul(g, u))[1])
    x = torch.randn(2, d, device="cuda").to(torch.bfloat16)
    fused = mlp(x[:1])
    serves = gemv_bt.serves(torch.empty(1, i, dtype=torch.bfloat16, device="cuda"), ops.prepared(mlp.down_proj.nvfp4))
    assert calls == ([] if serves else [1])
    monkeypatch.setattr(gemv_bt, "SILU_X", False)
    assert _rel_diff(fused, mlp(x[:1])) < SILU_TOL and calls[-1] == 1
    assert torch.isfinite(mlp(x)).all() and calls[-1] == 2


# (5120, ...): the 27B hidden size (GDN in_proj 16384 rows, MLP gate+up 34816); (2048, 2048): one tile a block
@pytest.mark.parametrize("n,k", [(16384, 5120), (34816, 5120), (2048, 2048)], ids=lambda v: str(v))
def test_norm_x_equals_rms_norm_then_gemv(n, k):
    """The _norm entries stage RMSNorm(x + residual) themselves and write h and y: h bit for bit the norm kernel's,
    y within one bf16 ulp of it in a few elements (another summation order for mean(h^2)), out within SILU_TOL of
    the norm kernel followed by the plain GEMV and within REL_TOL of dequantize-then-f32-matmul."""
    from kernels.norm import ops as norm_ops

    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    w = (torch.randn(k, device="cuda") * 0.3).to(torch.bfloat16)
    for unroll in gemv_bt.UNROLLS:
        x, res = (torch.randn(2, k, device="cuda") * 3.0).to(torch.bfloat16).chunk(2)
        x, res = x.contiguous(), res.contiguous()
        out, y, h = (torch.full((1, m), float("nan"), dtype=torch.bfloat16, device="cuda") for m in (n, k, k))
        gemv_bt.gemv_bt(x, p, out, unroll=unroll, norm=(res, w, 1e-6, h, y))
        want_y, want_h = norm_ops.rms_norm(x, w, 1e-6, res)
        assert torch.equal(h, want_h), unroll
        assert not torch.isnan(y).any() and _rel_diff(y, want_y) < 1e-3, unroll
        assert ((y.float() - want_y.float()).abs() <= want_y.float().abs() / 128 + 1e-30).all(), unroll
        two = torch.full((1, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemv_bt.gemv_bt(want_y, p, two, unroll=unroll)
        assert not torch.isnan(out).any() and _rel_diff(out, two) < SILU_TOL, unroll
        ref = want_y.float() @ ref_w.t()
        assert ((out.float() - ref).norm() / ref.norm()).item() < REL_TOL, unroll


def test_decoder_norm_rides_in_the_next_projection(monkeypatch):
    """RMSNorm.forward_into with the MLP's fused gate+up Linear at one row: no norm launch where gemv_bt serves, the
    MLP then returns its stashed gate+up output, and (y, h, MLP output) match the norm-then-MLP path."""
    from kernels.norm import ops as norm_ops
    from worker.layers import mlp as mlp_layer
    from worker.layers import norm as norm_layer
    from worker.layers.linear import Linear

    d, i = 5120, 17408
    mlp = mlp_layer.MLP(Linear(_weight(i, d)), Linear(_weight(i, d)), Linear(_weight(d, i)))
    assert mlp.fuse_projections()
    norm = norm_layer.RMSNorm((torch.randn(d, device="cuda") * 0.3).to(torch.bfloat16), 1e-6)
    calls = []
    rms_norm = norm_ops.rms_norm
    monkeypatch.setattr(norm_ops, "rms_norm", lambda *a, **kw: (calls.append(1), rms_norm(*a, **kw))[1])
    x, res = (torch.randn(1, d, device="cuda") * 3.0).to(torch.bfloat16), torch.randn(1, d, device="cuda").bfloat16()
    y, h = norm.forward_into(x, res, mlp.input_linear)
    fused_out = mlp(y)
    serves = gemv_bt.serves(x, ops.prepared(mlp.input_linear.nvfp4))
    assert calls == ([] if serves else [1])
    want_y, want_h = norm(x, res)
    assert torch.equal(h, want_h) and _rel_diff(y, want_y) < 1e-3
    assert _rel_diff(fused_out, mlp(want_y)) < 1e-2


# (5120, 6144): the 27B GDN out_proj (48 heads); (2048, 2048): 16 heads, one tile a block
@pytest.mark.parametrize("n,k", [(5120, 6144), (2048, 2048)], ids=lambda v: str(v))
def test_gated_norm_x_equals_gated_rms_norm_then_gemv(n, k):
    """The _gnorm entries stage the GDN output's gated RMSNorm over 128-wide heads (gate z: a column view of a wider
    projection output, as the fused in_proj gives it): within SILU_TOL of kernels.norm.ops.gated_rms_norm followed by
    the plain GEMV, within REL_TOL of dequantize-then-f32-matmul; Linear.forward_gated_norm serves one row only."""
    from kernels.norm import ops as norm_ops
    from worker.layers.linear import Linear

    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    w = (1.0 + torch.randn(128, device="cuda") * 0.1).to(torch.bfloat16)
    for unroll in gemv_bt.UNROLLS:
        x = (torch.randn(1, k, device="cuda") * 2.0).to(torch.bfloat16)
        z = (torch.randn(1, 2 * k + 64, device="cuda") * 2.0).to(torch.bfloat16)[:, k + 64:]
        out = torch.full((1, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemv_bt.gemv_bt(x, p, out, unroll=unroll, gated=(z, w, 1e-6))
        y = norm_ops.gated_rms_norm(x.view(1, -1, 128), z.view(1, -1, 128), w, 1e-6).view(1, k)
        two = torch.full((1, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemv_bt.gemv_bt(y, p, two, unroll=unroll)
        assert not torch.isnan(out).any() and _rel_diff(out, two) < SILU_TOL, unroll
        ref = y.float() @ ref_w.t()
        assert ((out.float() - ref).norm() / ref.norm()).item() < REL_TOL, unroll
    lin = Linear(weight)
    got = lin.forward_gated_norm(x, z, w, 1e-6)
    assert got is None or _rel_diff(got, two) < SILU_TOL
    assert (got is None) == (not gemv_bt.serves(x, p))
    x2 = torch.randn(2, k, device="cuda").to(torch.bfloat16)
    assert lin.forward_gated_norm(x2, torch.randn(2, k, device="cuda").to(torch.bfloat16), w, 1e-6) is None
