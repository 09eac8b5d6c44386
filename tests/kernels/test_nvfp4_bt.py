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
