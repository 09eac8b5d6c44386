"""kernels/dense/ops on a machine without a GPU: serves() turns away what the kernel cannot compute (so Linear keeps
torch's path), and gemv() raises a ValueError naming the limits instead of launching."""
import pytest
import torch

from kernels.dense import ops
from worker.layers.linear import Linear


def test_serves_is_false_on_cpu_and_linear_keeps_torch_results():
    w = torch.randn(96, 64).to(torch.bfloat16)
    x = torch.randn(2, 64).to(torch.bfloat16)
    assert not ops.serves(x, w)
    assert torch.equal(Linear(w)(x), torch.nn.functional.linear(x, w))


def test_gemv_refuses_what_it_cannot_serve():
    with pytest.raises(ValueError, match="at most 8 rows"):
        ops.gemv(torch.randn(1, 64).to(torch.bfloat16), torch.randn(4, 64).to(torch.bfloat16))


def test_limits_follow_the_kernel_constants():
    # gemv.cu: 128 threads x 8 vectors of 8 bf16 per thread
    assert ops.MAX_K == 128 * 8 * 8
    assert ops.MAX_M == 8
