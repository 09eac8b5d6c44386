"""kernels/nvfp4/gemm_ws.gemm_ws refuses what its kernels do not take before any GPU call (CPU only)."""
import pytest
import torch

from kernels.nvfp4 import gemm_ws


def _p(n=256, k=128):
    return {"N": n, "K": k, "Kc": -(-k // 64), "Np": -(-n // 128) * 128}


@pytest.mark.parametrize("kw,match", [({"tile": 256}, "tile must be one of"), ({"tile": 32}, "tile must be one of"),
                                      ({"splits": 3}, "splits must be"), ({"splits": -1}, "splits must be")])
def test_refused_tiles_and_splits(kw, match):
    x, out = torch.zeros(40, 128, dtype=torch.bfloat16), torch.zeros(40, 256, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=match):
        gemm_ws.gemm_ws(x, _p(), out, **kw)


def test_refused_shapes():
    x = torch.zeros(40, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="out must be"):
        gemm_ws.gemm_ws(x, _p(), torch.zeros(41, 256, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="x must be"):
        gemm_ws.gemm_ws(x.float(), _p(), torch.zeros(40, 256, dtype=torch.bfloat16))
