"""gemv_sk.cu (v13: 9-24 rows on stream-K quads with partial quads summed through the workspace, x read through L1
or staged; 2-32 rows on block-owned tiles) against dequantize-then-f32-matmul on fresh random inputs and NaN-poisoned
outputs, every row checked: every entry (M = 2, 3, 8 / 9, 16 staged and through L1 / 17, 24 / 25, 29, 32), N % 128 !=
0, K % 64 = 16 (x read through L1 stays in bounds; also on the block-owned entries reading x through L1: 6100 x
5136), 4-8 rows on the staged stream-K entry, K = 17408, most warps without work (256 x 256, 1000 x 1024), repeated
calls (the workspace and counters left zero), a PDL chain whose x is the previous y (eager and graph-replayed),
ops.gemv's and ops.linear's dispatch to it, and what it refuses (needs a GPU)."""
import pytest
import torch

from kernels.nvfp4 import gemv_pick, gemv_sk, ops
from tests.kernels.test_nvfp4_bc import _chain, _weight

pytestmark = pytest.mark.gpu
REL_TOL = 1e-2
ROWS = (2, 3, 8, 9, 16, 17, 24)


def _check(p, ref_w, m):
    x = torch.randn(m, p["K"], device="cuda").to(torch.bfloat16)
    ref = x.float() @ ref_w.t()
    for _ in range(2):  # the second call runs on the workspace and counters the first left
        out = torch.full((m, p["N"]), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemv_sk.gemv_sk(x, p, out)
        assert not torch.isnan(out).any(), m
        for row in range(m):
            assert ((out[row].float() - ref[row]).norm() / ref[row].norm()).item() < REL_TOL, (m, row)


@pytest.mark.parametrize("n,k", [(6144, 5120), (2100, 5120), (4000, 2000), (17408, 5120), (34816, 5120), (256, 256),
                                 (5120, 17408), (6100, 5136), (5120, 6144)], ids=lambda v: str(v))
def test_rows_match(n, k):
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    x = lambda m: torch.empty(m, k, dtype=torch.bfloat16, device="cuda")  # noqa: E731
    served = [m for m in ROWS if gemv_sk.applies(x(m), p, 132)]
    # only 8 rows of K = 17408 (278 KB) do not fit the shared memory; 9-24 rows read x through L1 there
    assert served == [m for m in ROWS if (n, k, m) != (5120, 17408, 8)]
    for m in served:
        _check(p, ref_w, m)


def test_staged_and_l1_entries_both_run():
    names = {(n, k): gemv_sk.kernel_name(16, ops.prepared(_weight(n, k)), 132)
             for n, k in ((6144, 5120), (17408, 5120), (34816, 5120), (5120, 17408))}
    # 2.9 and 8.2 tiles a block: owned, x through L1; 16.5 (174,080 fragments): stream-K, x staged; K = 17408 (87,040
    # fragments): stream-K through L1
    assert names == {(6144, 5120): "nvfp4_gemv_sk_own_nt2_xg", (17408, 5120): "nvfp4_gemv_sk_own_nt2_xg",
                     (34816, 5120): "nvfp4_gemv_sk_nt2", (5120, 17408): "nvfp4_gemv_sk_nt2_xg"}
    assert gemv_sk.kernel_name(8, ops.prepared(_weight(6144, 5120)), 132) == "nvfp4_gemv_sk_own_nt1_xg"


def test_narrow_rows_on_the_staged_stream_k_entry(monkeypatch):
    # 4-8 rows take the 9-16-row stream-K entry (x staged, rows past M repeat the last) on weights of WIDE_MAX_CHUNKS
    # fragments or more (the LM head): lowered here so that a small weight takes it too
    monkeypatch.setattr(gemv_sk, "WIDE_MAX_CHUNKS", 1000)
    weight = _weight(2100, 5120)  # 2,720 fragments; 1.03 tiles a block: not own_xg
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    assert [gemv_sk.kernel_name(m, p, 132) for m in (3, 4, 8)] == [
        "nvfp4_gemv_sk_own_nt1", "nvfp4_gemv_sk_nt2", "nvfp4_gemv_sk_nt2"]
    for m in (4, 5, 8):
        _check(p, ref_w, m)


@pytest.mark.parametrize("rows", [4, 16, 20])
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_pdl_chain(rows, graph):
    # each launch's x is the previous launch's y (2048 x 2048: 128 tiles x 32 chunks)
    _chain(lambda x, p, out: gemv_sk.gemv_sk(x, p, out), rows, graph)


def test_dispatch(monkeypatch):
    weight = _weight(17408, 5120)  # 87,040 fragments, 8.2 tiles a block, 136 row tiles of 128
    p = ops.prepared(weight)
    for m in (2, 8, 12, 16, 17, 24):
        assert gemv_pick.choice(torch.randn(m, 5120, device="cuda").to(torch.bfloat16), p) == "sk", m
    calls = []
    real = gemv_sk.gemv_sk
    monkeypatch.setattr(gemv_sk, "gemv_sk", lambda *a, **kw: calls.append(a[0].shape[0]) or real(*a, **kw))
    x = torch.randn(20, 5120, device="cuda").to(torch.bfloat16)
    y = ops.linear(x, weight)  # 20 rows: v13, not the wgmma GEMM
    ref = x.float() @ weight.dequantize().t()
    assert calls == [20] and ((y.float() - ref).norm() / ref.norm()).item() < REL_TOL
    fused = ops.prepared(_weight(16384, 5120))  # 7.8 tiles a block at K <= 6144: block-owned at 17-24 rows (session 25)
    assert gemv_sk.serves(torch.randn(21, 5120, device="cuda").to(torch.bfloat16), fused)
    wide = ops.prepared(_weight(16384, 8192))  # K > 6144: 128 row tiles on 132 SMs, the GEMM's full wave keeps 21-24
    assert not gemv_sk.serves(torch.randn(21, 8192, device="cuda").to(torch.bfloat16), wide)
    assert gemv_sk.serves(torch.randn(20, 8192, device="cuda").to(torch.bfloat16), wide)


def test_refuses_what_it_does_not_serve():
    p = ops.prepared(_weight(5120, 17408))
    for m, why in ((1, "M=1"), (8, "M=8"), (25, "M=25")):  # one row; 8 staged rows of 17408 (278 KB); 25 rows
        with pytest.raises(ValueError, match=why):
            gemv_sk.gemv_sk(torch.randn(m, 17408, device="cuda").to(torch.bfloat16), p,
                            torch.empty(m, 5120, dtype=torch.bfloat16, device="cuda"))


@pytest.mark.parametrize("n,k", [(6144, 5120), (5120, 6144), (17408, 5120), (6100, 5136), (1000, 1024)],
                         ids=lambda v: str(v))
def test_block_owned_25_to_32_rows(n, k, monkeypatch):
    # 25-32 rows: own_nt4_xg (its partial slots in dynamic shared memory), every row checked, and ops.linear takes it
    # where own_xg (session 25); 1000 x 1024 is 0.5 tiles a block, under OWN_XG_MIN_TILES: lowered to serve it
    monkeypatch.setattr(gemv_sk, "OWN_XG_MIN_TILES", 0.1)
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for m in (25, 29, 32):
        assert gemv_sk.kernel_name(m, p, 132) == "nvfp4_gemv_sk_own_nt4_xg"
        _check(p, ref_w, m)
    x = torch.randn(32, k, device="cuda").to(torch.bfloat16)
    assert ops._linear_kernel(x, p) is gemv_sk.gemv_sk
    ref = x.float() @ ref_w.t()
    assert ((ops.linear(x, weight).float() - ref).norm() / ref.norm()).item() < REL_TOL


def test_25_to_32_rows_elsewhere_stay_on_the_gemm():
    # the GEMM's 128-row tiles fill 97% of the SMs (16384x5120), 16.5 tiles a block (34816x5120), K = 17408
    for n, k in ((16384, 5120), (34816, 5120), (5120, 17408)):
        p = ops.prepared(_weight(n, k))
        x = torch.randn(25, k, device="cuda").to(torch.bfloat16)
        assert not gemv_sk.applies(x, p, 132) and ops._linear_kernel(x, p) is not gemv_sk.gemv_sk, (n, k)
