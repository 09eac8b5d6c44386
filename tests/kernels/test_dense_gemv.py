"""kernels/dense/gemv.cu (skinny bf16 GEMV) against an f32 matmul on fresh random inputs and NaN-poisoned outputs:
every M from 1 to 8, odd N, K from one vector to the largest served, row-strided x, CUDA-graph replays with the
kernel launched (PDL) right after a norm kernel that lets dependents start early, and Linear's dispatch (needs a
GPU)."""
import math

import pytest
import torch

from kernels.dense import ops
from kernels.norm import ops as norm_ops
from worker.layers.linear import Linear

pytestmark = pytest.mark.gpu
REL_TOL = 1e-2


def _w(n: int, k: int) -> torch.Tensor:
    return (torch.randn(n, k, device="cuda") / math.sqrt(k)).to(torch.bfloat16)


def _row_errors(out: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> list:
    ref = x.float() @ w.float().t()
    return [((o.float() - r).norm() / r.norm()).item() for o, r in zip(out, ref)]


@pytest.mark.parametrize("n,k", [(96, 5120), (97, 2048), (5, 8), (300, 8192), (1024, 136)], ids=str)
def test_gemv_matches_f32_matmul_for_every_row_count(n, k):
    w = _w(n, k)
    for m in range(1, ops.MAX_M + 1):
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        ops.gemv(x, w, out)
        assert not out.isnan().any(), m
        assert max(_row_errors(out, x, w)) < REL_TOL, m


def test_row_strided_x_and_leading_dims():
    w = _w(64, 512)
    wide = torch.randn(3, 2, 520, device="cuda").to(torch.bfloat16)  # rows 520 apart: a [..., :512] view
    x = wide[..., :512]
    y = ops.gemv(x, w)
    assert y.shape == (3, 2, 64)
    assert max(_row_errors(y.reshape(6, 64), x.reshape(6, 512), w)) < REL_TOL


def test_graph_replay_after_a_norm_kernel_reads_the_new_input():
    # rms_norm lets dependents launch at its start: the GEMV must wait before it reads x (kernels/_pdl.py)
    k, n = 5120, 96
    w, norm_w = _w(n, k), torch.randn(k, device="cuda").to(torch.bfloat16)
    raw = torch.randn(2, k, device="cuda").to(torch.bfloat16)
    out = torch.empty(2, n, dtype=torch.bfloat16, device="cuda")
    ops.gemv(norm_ops.rms_norm(raw, norm_w, 1e-6), w, out)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ops.gemv(norm_ops.rms_norm(raw, norm_w, 1e-6), w, out)
    for _ in range(3):
        raw.copy_(torch.randn(2, k, device="cuda").to(torch.bfloat16))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        x = norm_ops.rms_norm(raw, norm_w, 1e-6)
        assert not out.isnan().any()
        assert max(_row_errors(out, x, w)) < REL_TOL


def test_linear_dispatches_skinny_bf16_to_the_kernel_and_falls_back_past_dispatch_max_m():
    w = _w(96, 5120)
    lin = Linear(w)
    for m in (1, 4, 5, 9, 33):
        x = torch.randn(m, 5120, device="cuda").to(torch.bfloat16)
        assert ops.serves(x, w) == (m <= ops.DISPATCH_MAX_M)
        y = lin(x)
        assert y.shape == (m, 96) and y.dtype == torch.bfloat16
        assert max(_row_errors(y, x, w)) < REL_TOL
