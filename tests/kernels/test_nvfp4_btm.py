"""gemv_btm.cu (v12m: 2..16 rows, v7's decode with x staged and early weight loads, on v12's whole-tile split)
against dequantize-then-f32-matmul on fresh random inputs and NaN-poisoned outputs, every row checked: NT = 1 and 2,
blocks of 1-17 tiles, tiles split over warps, Kc = 32 with K % 64 = 16, a PDL chain whose x is the previous y
(eager and graph-replayed), and what it refuses (needs a GPU)."""
import pytest
import torch

from kernels.nvfp4 import gemv_btm, ops
from tests.kernels.test_nvfp4_bc import _chain, _weight

pytestmark = pytest.mark.gpu
REL_TOL = 1e-2


@pytest.mark.parametrize("n,k", [(6144, 5120), (2100, 5120), (4000, 2000), (17408, 5120), (34816, 5120)],
                         ids=lambda v: str(v))
def test_block_tiles_rows_match(n, k):
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for m in (2, 3, 8, 9, 16):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        gemv_btm.gemv_btm(x, p, out)
        ref = x.float() @ ref_w.t()
        assert not torch.isnan(out).any(), m
        for row in range(m):
            assert ((out[row].float() - ref[row]).norm() / ref[row].norm()).item() < REL_TOL, (m, row)


@pytest.mark.parametrize("rows", [4, 16])
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_pdl_chain(rows, graph):
    # each launch's x is the previous launch's y (2048 x 2048: 128 blocks of one tile, 32 chunks over 16 warps)
    _chain(lambda x, p, out: gemv_btm.gemv_btm(x, p, out), rows, graph)


def test_refuses_what_it_does_not_serve():
    p = ops.prepared(_weight(5120, 17408))
    for m, why in ((1, "M=1"), (16, "M=16")):  # one row; 16 rows of x (557 KB) past the shared memory
        with pytest.raises(ValueError, match=why):
            gemv_btm.gemv_btm(torch.randn(m, 17408, device="cuda").to(torch.bfloat16), p,
                              torch.empty(m, 5120, dtype=torch.bfloat16, device="cuda"))
