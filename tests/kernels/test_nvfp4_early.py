"""gemv.cu's *_early kernels (v7 whose first weight loads go out before griddepcontrol.wait, x after it) against
dequantize-then-f32-matmul on fresh random inputs and NaN-poisoned outputs, every row checked: M = 1..32 (NT = 1, 2,
4), x staged in shared memory or not, a PDL chain whose x is the previous kernel's y (eager and graph-replayed), and
gemv_pick's choices on an H200 (needs a GPU)."""
import pytest
import torch

from kernels.nvfp4 import gemv_btm, gemv_pick, gemv_sk, ops
from tests.kernels.test_nvfp4_bc import _chain, _weight

pytestmark = pytest.mark.gpu
REL_TOL = 1e-2


@pytest.mark.parametrize("n,k", [(300, 320), (1000, 1040), (6144, 5120), (5120, 17408)], ids=lambda v: str(v))
def test_early_kernels_match(n, k):
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for m in (1, 2, 5, 8, 9, 16, 17, 32):
        for xs in (False, True):
            if xs and (m > 16 or m * p["Kc"] * 128 > ops.XS_MAX_BYTES):
                continue
            x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
            ops.gemv_v2(x, p, out, xs=xs, early=True)
            ref = x.float() @ ref_w.t()
            assert not torch.isnan(out).any(), (m, xs)
            for row in range(m):
                assert ((out[row].float() - ref[row]).norm() / ref[row].norm()).item() < REL_TOL, (m, xs, row)


@pytest.mark.parametrize("rows,xs", [(4, False), (4, True), (16, False)], ids=["m4", "m4-xs", "m16"])
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_early_loads_wait_for_the_previous_kernel(rows, xs, graph):
    # each launch's x is the previous launch's y: x read before the kernel before had finished would not match
    _chain(lambda x, p, out: ops.gemv_v2(x, p, out, xs=xs, early=True), rows, graph)


def test_pick_on_hopper():
    switches = ops.PDL and gemv_pick.EARLY and gemv_btm.GEMV_BTM and gemv_sk.GEMV_SK
    if torch.cuda.get_device_capability() != (9, 0) or not switches:
        pytest.skip("the choices below are the Hopper + PDL ones")
    shapes = {"gate_up": (34816, 5120), "mid": (12288, 5120), "small": (6144, 5120), "fused": (16384, 5120),
              "down": (5120, 17408)}
    w = {name: ops.prepared(_weight(n, k)) for name, (n, k) in shapes.items()}
    x = lambda m, k=5120: torch.randn(m, k, device="cuda").to(torch.bfloat16)  # noqa: E731
    assert gemv_pick.choice(x(1), w["small"]) == "bt"
    for m in (2, 8):
        assert gemv_pick.choice(x(m), w["gate_up"]) == "btm", m  # 16.5 tiles a block
    assert gemv_pick.choice(x(16), w["gate_up"]) == "sk"  # 174,080 fragments
    assert gemv_pick.choice(x(2), w["mid"]) == "sk"  # 5.8 tiles a block, imbalance 1.03 (was bcr)
    assert gemv_pick.choice(x(2), w["small"]) == "sk"  # 2.9 tiles a block
    assert gemv_pick.choice(x(8, 17408), w["down"]) == "v2_early"  # 2.4 tiles a block: imbalance 1.24
    assert gemv_pick.choice(x(4), w["fused"]) == "sk"  # 7.8 tiles a block (was cluster)
    assert gemv_pick.choice(x(16), w["mid"]) == "sk"  # 61,440 fragments
    assert gemv_pick.choice(x(16), w["small"]) == "sk"  # x read through L1 (30,720 fragments; was v2)
    assert gemv_pick.choice(x(4), w["small"], variant="_atomic") == "v2"
