"""gemv_bc.cu (v10, block columns, M = 1) against dequantize-then-f32-matmul on fresh random inputs and NaN-poisoned
outputs: Kc even and odd (a zero-padded last pair), K % 64 != 0, the 27B shapes with partial row groups, every
unroll, the +-0.5 codes (bf16 subnormals in the MMA), x far from 1, the shared split-K workspace left clean, and
CUDA-graph replays (needs a GPU)."""
import pytest
import torch

from kernels.nvfp4 import checkpoint, gemv_bc, naive, ops

pytestmark = pytest.mark.gpu
REL_TOL = 1e-2


def _weight(n: int, k: int) -> checkpoint.NVFP4Weight:
    w = torch.randn(n, k, device="cuda") * (0.5 + torch.rand(n, 1, device="cuda"))
    return checkpoint.from_tensors(naive.quantize(w, "modelopt"))


def _rel(p, ref_w, x, **kw) -> float:
    out = torch.full((1, p["N"]), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemv_bc.gemv_bc(x, p, out, **kw)
    ref = x.float() @ ref_w.t()
    assert not torch.isnan(out).any(), kw
    return ((out.float() - ref).norm() / ref.norm()).item()


# (200, 80): Kc = 2, one pair; (1000, 1040): Kc = 17, the last pair half padding; the rest: 27B shapes
@pytest.mark.parametrize("n,k", [(200, 80), (1000, 1040), (130, 208), (6144, 5120), (5120, 17408), (17408, 5120)],
                         ids=lambda v: str(v))
def test_block_column_gemv_matches(n, k):
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for unroll in gemv_bc.UNROLLS:
        x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
        assert _rel(p, ref_w, x, unroll=unroll) < REL_TOL, unroll


def _half_codes(n: int, k: int) -> checkpoint.NVFP4Weight:
    """Every code +-0.5 (bf16 subnormals into the MMA), every scale and the global scale 1: with x = +-1, y is an
    exact sum of +-0.5."""
    weight = _weight(n, k)
    signs = torch.randint(0, 2, (n, k // 2), device="cuda", dtype=torch.uint8)
    weight.packed = (0x1 | (signs & 1) << 3) | ((0x1 | (1 - (signs & 1)) << 3) << 4)  # +-0.5 in both nibbles
    weight.scale = torch.full_like(weight.scale.view(torch.uint8), 0x38).view(torch.float8_e4m3fn)  # 1.0
    weight.gmul = torch.tensor(1.0, device="cuda")
    return weight


def test_half_codes_are_exact():
    n, k = 256, 512
    weight = _half_codes(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    x = (torch.randint(0, 2, (1, k), device="cuda") * 2 - 1).to(torch.bfloat16)
    out = torch.full((1, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemv_bc.gemv_bc(x, p, out)
    assert torch.equal(out.float(), x.float() @ ref_w.t())


@pytest.mark.parametrize("scale", [1e-3, 3e3])
def test_x_far_from_one(scale):
    weight = _weight(3000, 2000)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    x = (torch.randn(1, 2000, device="cuda") * scale).to(torch.bfloat16)
    assert _rel(p, ref_w, x) < REL_TOL


def test_workspace_left_clean_and_graph_replays():
    # gemv_bc shares ops' split-K workspace and counters with gemv_v2: each must leave them zero for the other
    weight = _weight(5120, 17408)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for _ in range(2):
        x1 = torch.randn(1, 17408, device="cuda").to(torch.bfloat16)
        assert _rel(p, ref_w, x1) < REL_TOL
        x16 = torch.randn(16, 17408, device="cuda").to(torch.bfloat16)
        out16 = torch.full((16, 5120), float("nan"), dtype=torch.bfloat16, device="cuda")
        ops.gemv_v2(x16, p, out16)
        ref16 = x16.float() @ ref_w.t()
        assert ((out16.float() - ref16).norm() / ref16.norm()).item() < REL_TOL
    x = torch.randn(1, 17408, device="cuda").to(torch.bfloat16)
    out = torch.full((1, 5120), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemv_bc.gemv_bc(x, p, out)  # compile and build the scale words outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemv_bc.gemv_bc(x, p, out)
    for _ in range(3):
        x.copy_(torch.randn(1, 17408, device="cuda").to(torch.bfloat16))
        out.fill_(float("nan"))
        graph.replay()
        ref = x.float() @ ref_w.t()
        assert ((out.float() - ref).norm() / ref.norm()).item() < REL_TOL


def test_refuses_what_it_does_not_serve():
    p = ops.prepared(_weight(256, 512))
    out = torch.empty(2, 256, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ValueError, match="M=2"):
        gemv_bc.gemv_bc(torch.randn(2, 512, device="cuda").to(torch.bfloat16), p, out)


def _chain(launch, rows: int, graph: bool):
    """Three 2048 x 2048 GEMVs, each x the previous y, through launch(x, p, out) eagerly or replayed from a graph
    with fresh x; asserts each y against the reference computed from the previous kernel's own output."""
    ws = [_weight(2048, 2048) for _ in range(3)]
    refs, ps = [w.dequantize() / 45 for w in ws], [ops.prepared(w) for w in ws]
    for p in ps:
        p["alpha"] = p["alpha"] / 45  # keep |y| near |x| through the chain
    xs = [torch.randn(rows, 2048, device="cuda").to(torch.bfloat16)]
    xs += [torch.full((rows, 2048), float("nan"), dtype=torch.bfloat16, device="cuda") for _ in ps]

    def chain():
        for i, p in enumerate(ps):
            launch(xs[i], p, xs[i + 1])

    chain()
    if graph:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            chain()
        xs[0].copy_(torch.randn(rows, 2048, device="cuda").to(torch.bfloat16))
        for y in xs[1:]:
            y.fill_(float("nan"))
        g.replay()
    torch.cuda.synchronize()
    for i, ref_w in enumerate(refs):
        ref = xs[i].float() @ ref_w.t()
        assert ((xs[i + 1].float() - ref).norm() / ref.norm()).item() < REL_TOL, i


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_pdl_launch_waits_for_the_previous_kernel(graph):
    # each launch's x is the previous launch's y: a launch that read x (or wrote y) before the kernel before it had
    # finished would not match the reference computed from that kernel's own output
    _chain(lambda x, p, out: gemv_bc.gemv_bc(x, p, out, pdl=True), 1, graph)


def test_ops_gemv_takes_v10_for_one_row():
    # ops.gemv serves M = 1 with gemv_bc on Hopper (PDL on: every shape; its scale words appear on first use), and
    # M = 2 with the other kernels
    weight = _weight(6144, 5120)  # a gemv_tile shape before v10
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    x2 = torch.randn(2, 5120, device="cuda").to(torch.bfloat16)
    out2 = torch.full((2, 6144), float("nan"), dtype=torch.bfloat16, device="cuda")
    ops.gemv(x2, p, out2)
    assert "wsb" not in p
    x = x2[:1].clone()
    out = torch.full((1, 6144), float("nan"), dtype=torch.bfloat16, device="cuda")
    ops.gemv(x, p, out)
    assert ("wsb" in p) == (ops.PDL and torch.cuda.get_device_capability() == (9, 0))
    ref = x.float() @ ref_w.t()
    assert ((out.float() - ref).norm() / ref.norm()).item() < REL_TOL
    assert torch.equal(out, out2[:1]) or ((out.float() - out2[:1].float()).norm() / ref.norm()).item() < REL_TOL


# gemv_bcr.cu (M = 2..8): every M, K % 64 == 16, partial row groups, x staged up to 100 KB (K = 17408 at M = 2)
@pytest.mark.parametrize("n,k", [(200, 80), (1000, 1040), (130, 208), (6144, 5120), (17408, 5120), (5120, 17408)],
                         ids=lambda v: str(v))
def test_block_column_rows_gemv_matches(n, k):
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for m in range(2, 9):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        if not gemv_bc.rows_applies(x, p):
            assert gemv_bc.rows_smem(m, p) > gemv_bc.ROWS_MAX_SMEM
            continue
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemv_bc.gemv_bcr(x, p, out)
        ref = x.float() @ ref_w.t()
        assert not torch.isnan(out).any(), m
        assert ((out.float() - ref).norm() / ref.norm()).item() < REL_TOL, m
        for row in range(m):  # every row right, not only the whole
            assert ((out[row].float() - ref[row]).norm() / ref[row].norm()).item() < REL_TOL, (m, row)


@pytest.mark.parametrize("pdl", [False, True])
def test_block_column_rows_chain_and_graph(pdl):
    # M = 4 rows through a chain of 3 GEMVs, launched plainly or with PDL, replayed from a graph
    _chain(lambda x, p, out: gemv_bc.gemv_bcr(x, p, out, pdl=pdl), 4, True)



def test_ops_gemv_takes_v10r_for_two_rows(monkeypatch):
    # M = 2 on a K = 5120 shape of at least gemv_pick.ROWS_MIN_CHUNKS fragments that neither gemv_btm (5.8 tiles a
    # block) nor gemv_cluster takes goes to gemv_bcr (alpha_bc appears), M = 3 does not (gemv_sk off: it takes both)
    from kernels.nvfp4 import gemv_sk

    monkeypatch.setattr(gemv_sk, "GEMV_SK", False)
    weight = _weight(12288, 5120)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    x3 = torch.randn(3, 5120, device="cuda").to(torch.bfloat16)
    out3 = torch.full((3, 12288), float("nan"), dtype=torch.bfloat16, device="cuda")
    ops.gemv(x3, p, out3)
    assert "alpha_bc" not in p
    x = x3[:2].clone()
    out = torch.full((2, 12288), float("nan"), dtype=torch.bfloat16, device="cuda")
    ops.gemv(x, p, out)
    assert ("alpha_bc" in p) == (torch.cuda.get_device_capability() == (9, 0))
    ref = x.float() @ ref_w.t()
    assert ((out.float() - ref).norm() / ref.norm()).item() < REL_TOL


def test_three_blocks_per_sm():
    weight = _weight(5120, 17408)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for _ in range(2):
        x = torch.randn(1, 17408, device="cuda").to(torch.bfloat16)
        assert _rel(p, ref_w, x, unroll=2, blocks_per_sm=3) < REL_TOL
