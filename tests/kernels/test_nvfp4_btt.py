"""gemv_btt.cu (v14, block tiles with the weights streamed by TMA into a shared-memory ring, M = 1) against
dequantize-then-f32-matmul on fresh random inputs and NaN-poisoned outputs, every compiled ring config: one tile a
block, K % 64 != 0, rings that wrap many times (34816x5120: 41 stages of 16 pairs on an 11-stage ring), the +-0.5
codes exactly, the x-staging folds (silu, norm, gated norm) against v12's, a PDL chain eager and replayed from a
CUDA graph, and ops.gemv's choice (needs a GPU)."""
import pytest
import torch

from kernels import _compile
from kernels.nvfp4 import gemv_bt, gemv_btt, ops
from tests.kernels.test_nvfp4_bc import _chain, _half_codes, _weight

pytestmark = pytest.mark.gpu
REL_TOL = 1e-2
FOLD_TOL = 1e-3  # v14 against v12 on the same staged x: the split tiles' sums are added in another order


def _nan(n: int) -> torch.Tensor:
    return torch.full((1, n), float("nan"), dtype=torch.bfloat16, device="cuda")


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def _configs(p: dict) -> list:
    configs = [c for c in gemv_btt.CONFIGS if gemv_btt.fits(p, c)]
    assert configs, (p["N"], p["K"])
    return configs


# (300, 5120): 19 tiles, one a block; (4000, 2000): K % 64 = 16, 16 pairs a tile; (2048, 2048): 128 one-tile
# blocks; the rest: 27B shapes (34816x5120 and 5120x17408 wrap their rings)
@pytest.mark.parametrize("n,k", [(300, 5120), (4000, 2000), (2048, 2048), (6144, 5120), (5120, 6144), (34816, 5120),
                                 (5120, 17408)], ids=lambda v: str(v))
def test_tma_gemv_matches(n, k):
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    for config in _configs(p):
        x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
        ref = x.float() @ ref_w.t()
        out = _nan(n)
        for _ in range(2):  # the second launch on barriers and a ring its first left behind
            out.fill_(float("nan"))
            gemv_bt.gemv_bt(x, p, out, tma=config)
        assert not torch.isnan(out).any() and _rel(out, ref) < REL_TOL, config


def test_tma_half_codes_are_exact():
    weight = _half_codes(4096, 2048)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    x = (torch.randint(0, 2, (1, 2048), device="cuda") * 2 - 1).to(torch.bfloat16)
    for config in _configs(p):
        out = _nan(4096)
        gemv_bt.gemv_bt(x, p, out, tma=config)
        assert torch.equal(out.float(), x.float() @ ref_w.t()), config


def _fold(kind: str, k: int) -> dict:
    bf = {"dtype": torch.bfloat16, "device": "cuda"}
    if kind == "x_up":
        return {"x_up": (torch.randn(1, k, device="cuda") * 4).to(torch.bfloat16)}
    if kind == "norm":
        return {"norm": ((torch.randn(1, k, device="cuda") * 3).to(torch.bfloat16), (torch.randn(k, device="cuda")
                         * 0.3).to(torch.bfloat16), 1e-6, torch.full((1, k), float("nan"), **bf),
                         torch.full((1, k), float("nan"), **bf))}
    return {"gated": (torch.randn(1, k, device="cuda").to(torch.bfloat16), torch.randn(128, **bf), 1e-6)}


# the folds where the model runs them on v14: MLP down (silu), MLP gate+up and GDN in_proj (norm), GDN out_proj (gated)
@pytest.mark.parametrize("n,k,kind", [(5120, 17408, "x_up"), (34816, 5120, "norm"), (16384, 5120, "norm"),
                                      (5120, 6144, "gated"), (2048, 2048, "x_up")], ids=lambda v: str(v))
def test_tma_folds_match_v12(n, k, kind):
    """v14's _silu / _norm / _gnorm entries stage x as v12's do (the same gemv_bt_stage.cuh code on 16 or 24 warps):
    out within FOLD_TOL of v12's, the norm's h bit for bit and y within one bf16 ulp (the sum of squares is added
    over another number of warps)."""
    p = ops.prepared(_weight(n, k))
    x = (torch.randn(1, k, device="cuda") * 3).to(torch.bfloat16)
    for config in _configs(p):
        kw = _fold(kind, k)
        out = _nan(n)
        gemv_bt.gemv_bt(x, p, out, tma=config, **kw)
        got = [t.clone() for t in kw["norm"][3:]] if kind == "norm" else []
        want = _nan(n)
        gemv_bt.gemv_bt(x, p, want, unroll=2, **kw)
        assert not torch.isnan(out).any() and _rel(out, want) < FOLD_TOL, config
        if kind == "norm":
            h, y = kw["norm"][3:]
            assert torch.equal(got[0], h) and not torch.isnan(got[1]).any(), config
            assert ((got[1].float() - y.float()).abs() <= y.float().abs() / 128 + 1e-30).all(), config


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("config", gemv_btt.CONFIGS, ids=lambda c: "_".join(map(str, c)))
def test_tma_pdl_chain(graph, config):
    # each launch's x is the previous launch's y (2048 x 2048: 128 blocks of one tile, 16 pairs)
    _chain(lambda x, p, out: gemv_bt.gemv_bt(x, p, out, pdl=True, tma=config), 1, graph)


def test_ops_gemv_takes_v14_where_measured_faster():
    # on an H200 (132 SMs) with PDL: 6144x5120 (2.9 tiles a block) -> 8_8_16, 5120x17408 -> 16_4_16,
    # 17408x5120 (8.2 tiles a block) -> 16_4_24; right either way
    sms = _compile.num_sms(torch.device("cuda"))
    for n, k, want in ((6144, 5120, (8, 8, 16)), (5120, 17408, (16, 4, 16)), (17408, 5120, (16, 4, 24))):
        weight = _weight(n, k)
        ref_w, p = weight.dequantize(), ops.prepared(weight)
        if sms == 132 and gemv_btt.TMA:
            assert gemv_btt.choice(p, sms) == want, (n, k)
        x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
        out = _nan(n)
        ops.gemv(x, p, out)
        assert not torch.isnan(out).any() and _rel(out, x.float() @ ref_w.t()) < REL_TOL, (n, k)


def test_refuses_a_config_that_does_not_fit():
    p = ops.prepared(_weight(4096, 5184))  # Kc = 81: odd
    with pytest.raises(ValueError, match="does not serve"):
        gemv_bt.gemv_bt(torch.randn(1, 5184, device="cuda").to(torch.bfloat16), p,
                        torch.empty(1, 4096, dtype=torch.bfloat16, device="cuda"), tma=(16, 4, 16))
