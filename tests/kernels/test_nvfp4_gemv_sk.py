"""gemv_sk.cu (v13: 9-16 rows on stream-K quads with partial quads summed through the workspace, 2-8 rows on
block-owned tiles) against dequantize-then-f32-matmul on fresh random inputs and NaN-poisoned outputs, every row
checked: N % 128 != 0, K % 64 = 16, segments shorter than Kc and spanning several quads or tiles, most warps without work (256 x 256), repeated calls
(the workspace and counters left zero), a PDL chain whose x is the previous y (eager and graph-replayed), ops.gemv's
dispatch to it, and what it refuses (needs a GPU)."""
import pytest
import torch

from kernels.nvfp4 import gemv_pick, gemv_sk, ops
from tests.kernels.test_nvfp4_bc import _chain, _weight

pytestmark = pytest.mark.gpu
REL_TOL = 1e-2


@pytest.mark.parametrize("n,k", [(6144, 5120), (2100, 5120), (4000, 2000), (17408, 5120), (34816, 5120), (256, 256)],
                         ids=lambda v: str(v))
def test_rows_match(n, k):
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for m in (2, 3, 8, 9, 16):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        ref = x.float() @ ref_w.t()
        for _ in range(2):  # the second call runs on the workspace and counters the first left
            out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
            gemv_sk.gemv_sk(x, p, out)
            assert not torch.isnan(out).any(), m
            for row in range(m):
                assert ((out[row].float() - ref[row]).norm() / ref[row].norm()).item() < REL_TOL, (m, row)


@pytest.mark.parametrize("rows", [4, 16])
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_pdl_chain(rows, graph):
    # each launch's x is the previous launch's y (2048 x 2048: 128 tiles x 32 chunks)
    _chain(lambda x, p, out: gemv_sk.gemv_sk(x, p, out), rows, graph)


def test_dispatch():
    p = ops.prepared(_weight(17408, 5120))  # 87,040 fragments, 8.2 tiles a block
    for m in (2, 8, 12, 16):
        x = torch.randn(m, 5120, device="cuda").to(torch.bfloat16)
        assert gemv_pick.choice(x, p) == "sk", m


def test_refuses_what_it_does_not_serve():
    p = ops.prepared(_weight(5120, 17408))
    for m, why in ((1, "M=1"), (16, "M=16")):  # one row; 16 rows of x (557 KB) past the shared memory
        with pytest.raises(ValueError, match=why):
            gemv_sk.gemv_sk(torch.randn(m, 17408, device="cuda").to(torch.bfloat16), p,
                            torch.empty(m, 5120, dtype=torch.bfloat16, device="cuda"))
