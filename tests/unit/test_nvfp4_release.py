"""The worker's load-time NVFP4 repack (worker/layers/linear.prepack_nvfp4) and NVFP4Weight.release_checkpoint_layout,
on CPU: a released weight keeps shape, device and nbytes but holds no codes and refuses to dequantize or move; on a
CPU model the prepack does nothing (the naive path reads the checkpoint layout)."""
import pytest
import torch

from kernels.nvfp4 import checkpoint, naive
from worker.layers.linear import Linear, prepack_nvfp4


def _weight(n=48, k=64) -> checkpoint.NVFP4Weight:
    torch.manual_seed(n + k)
    return checkpoint.from_tensors(naive.quantize(torch.randn(n, k), "modelopt"))


def test_release_frees_the_codes_and_refuses_their_use():
    w = _weight()
    shape, nbytes, device = w.shape, w.nbytes(), w.device
    freed = w.release_checkpoint_layout()
    assert freed == 48 * 32 + 48 * 4  # packed codes + block scales, one byte each
    assert w.released and w.shape == shape and w.nbytes() == nbytes and w.device == device
    assert w.packed.untyped_storage().nbytes() == 1 and w.scale.untyped_storage().nbytes() == 1
    with pytest.raises(RuntimeError, match="released after the GPU repack"):
        w.dequantize()
    with pytest.raises(RuntimeError, match="released after the GPU repack"):
        w.to("cpu")


def test_prepack_leaves_a_cpu_model_alone():
    w = _weight()
    model = torch.nn.Sequential(Linear(w), Linear(torch.randn(8, 48)))
    assert prepack_nvfp4(model) == 0
    assert not w.released and w.packed.untyped_storage().nbytes() == 48 * 32
    torch.manual_seed(0)
    x = torch.randn(3, 64)
    assert torch.equal(model(x), torch.nn.functional.linear(torch.nn.functional.linear(x, w.dequantize()),
                                                            model[1].weight))
