"""Launcher of gemv_bt.cu (v12, "block tiles"): the block-column M = 1 GEMV (v10's decode and layouts, gemv_bc.py)
with one 16-warp block per SM owning whole 16-row tiles, so no split-K reduction leaves a block (method: gemv_bt.cu's
header).

Letters as ops.py: N out features, K in features, Np = N rounded up to 128, T = Np / 16 tiles, Kc = ceil(K / 64)
chunks, Kp = ceil(Kc / 2) chunk pairs, G blocks (min(T, SMs)).
"""
import os

import torch

from kernels import _compile
from kernels.nvfp4 import gemv_bc, gemv_btt, ops

# ops.gemv sends M = 1 here on Hopper with PDL where every SM gets a block and the blocks' tile counts differ by at
# most MAX_IMBALANCE; H200 session 12 run 8 (us, v10 as dispatched before / v12 unroll 2 / 3, imbalance): 6144x5120
# 9.9 / 9.1 / 9.3 (1.03), 10240x5120 13.8 / 12.4 / 12.5, 5120x6144 10.2 / 9.4 / 9.3 (1.24), 17408x5120 20.2 / 18.7 /
# 18.1 (1.09), 5120x17408 20.5 / 21.2 / 20.4 (1.24), 12288x5120 15.3 / 14.0 / 13.8, 34816x5120 33.2 / 31.9 / 30.7,
# LM head 193.8 / 196.1 / 185.2 (1.004), 16384x5120 19.3 / 17.2 / 17.0. SPARKINFER_NVFP4_BT=0 keeps v10.
GEMV_BT = os.environ.get("SPARKINFER_NVFP4_BT", "1") == "1"
MAX_IMBALANCE = 1.25
SILU_X = os.environ.get("SPARKINFER_NVFP4_SILU_X", "1") == "1"  # 0: MLP down projections after a silu_mul launch
NORM_X = os.environ.get("SPARKINFER_NVFP4_NORM_X", "1") == "1"  # 0: projections after an RMSNorm launch
GNORM_X = os.environ.get("SPARKINFER_NVFP4_GNORM_X", "1") == "1"  # 0: the GDN out_proj after a gated-norm launch
GATED_HEAD = 128  # the _gnorm entries' head width (the GDN value head dim)
BT_U3_CHUNKS = 40_000  # unroll 2 below this many fragments (Np / 16 * Kc), 3 from there
UNROLLS = (2, 3)  # chunk pairs per register group compiled (nvfp4_gemv_bt_u{U})
MAX_TILES = 128  # gemv_bt.cu BT_MAX_TILES
WARPS = 16  # gemv_bt.cu BT_WARPS


def blocks(p: dict, sms: int) -> int:
    """G = min(T, sms): one block per SM."""
    return min(p["Np"] // 16, sms)


def imbalance(p: dict, sms: int) -> float:
    """The most tiles a block streams over the mean: ceil(T / G) / (T / G) (1.0: every block the same)."""
    t, g = p["Np"] // 16, blocks(p, sms)
    return -(-t // g) / (t / g)


def applies(x: torch.Tensor, p: dict, sms: int) -> bool:
    """gemv_bc.applies (M = 1, K % 8 == 0, x aligned, x staged in 64 KB), at most MAX_TILES tiles a block and at
    least WARPS chunk pairs a block (every warp stages x with the others)."""
    t, g, kp = p["Np"] // 16, blocks(p, sms), (p["Kc"] + 1) // 2
    return gemv_bc.applies(x, p) and -(-t // g) <= MAX_TILES and (t // g) * kp >= WARPS


def gemv_bt(x: torch.Tensor, p: dict, out: torch.Tensor, unroll: int = 2, pdl: bool = True,
            x_up: torch.Tensor = None, norm: tuple = None, gated: tuple = None, tma: tuple = None) -> torch.Tensor:
    """x [1, K] bf16 contiguous (|x| < 2^28), p = ops.prepared(...) -> out [1, N] bf16 (written). Grid of G blocks of
    16 warps; no workspace. unroll: UNROLLS; pdl as gemv_bc.gemv_bc; tma: a gemv_btt.CONFIGS ring shape runs v14
    (gemv_btt.cu, the weights by TMA into shared memory; unroll unused), None v12. The GEMV's x can be computed while
    staging it:
    - x_up [1, K] bf16: x := bf16(bf16(silu(x)) * x_up), rounded as kernels.norm.ops.silu_mul (the _silu entries);
    - norm = (residual [1, K], weight [K], eps, h_out [1, K], y_out [1, K]), bf16 tensors: h = bf16(x + residual),
      x := RMSNorm(h) = bf16(h * rsqrt(mean(h^2) + eps) * (1 + weight)), rounded as kernels.norm.ops.rms_norm; h
      and the normalised x are written to h_out and y_out (the _norm entries);
    - gated = (z [1, K], weight [128], eps), bf16 tensors, K % 128 == 0: x := the gated RMSNorm of each 128-wide head,
      bf16(bf16(weight * bf16(x * rsqrt(mean_head(x^2) + eps))) * silu(z)), rounded as
      kernels.norm.ops.gated_rms_norm (the _gnorm entries).
    Raises ValueError where `applies` is false, an extra tensor is misplaced, more than one of x_up / norm / gated is
    given or unroll is not built (or, with tma, the config does not fit the weight)."""
    import numpy as np

    if sum(v is not None for v in (x_up, norm, gated)) > 1:
        raise ValueError("gemv_bt: at most one of x_up, norm and gated")
    sms = _compile.num_sms(x.device)
    extra = () if x_up is None else (x_up,)
    extra += () if norm is None else (norm[0], norm[1].view(1, -1), norm[3], norm[4])
    extra += () if gated is None else (gated[0],)
    heads_ok = gated is None or (p["K"] % GATED_HEAD == 0 and _aligned_row(gated[1], GATED_HEAD))
    if not applies(x, p, sms) or unroll not in UNROLLS or not all(_pairs_with(x, t) for t in extra) or not heads_ok:
        raise ValueError(f"gemv_bt: M={x.shape[0]}, N={p['N']}, K={p['K']}, unroll {unroll}: not served")
    p = gemv_bc.prepared_bc(p)
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    args = (ptr(p["wq"]), ptr(p["wsb"]), ptr(x), ptr(out), ptr(p["alpha_bc"]), np.int32(p["N"]), np.int32(p["K"]),
            np.int32(p["Np"]), np.int32(p["Kc"]))
    suffix, mode_args = "", ()
    if x_up is not None:
        mode_args, suffix = (ptr(x_up),), "_silu"
    elif norm is not None:
        mode_args, suffix = (ptr(norm[0]), ptr(norm[1]), np.float32(norm[2]), ptr(norm[3]), ptr(norm[4])), "_norm"
    elif gated is not None:
        mode_args, suffix = (ptr(gated[0]), ptr(gated[1]), np.float32(gated[2])), "_gnorm"
    if tma is not None:
        gemv_btt.launch(suffix, p, tma, blocks(p, sms), args, mode_args, pdl)
        return out
    kernel = gemv_bc._kernel(f"nvfp4_gemv_bt{suffix}_u{unroll}", "gemv_bt.cu")
    ops._launch("", "", (blocks(p, sms),), (32 * WARPS,), args + mode_args, kernel, gemv_bc._smem(p), pdl)
    return out


def _pairs_with(x: torch.Tensor, x_up: torch.Tensor) -> bool:
    """x_up can be read beside x: [1, K] bf16 on x's device, contiguous, 16-byte aligned."""
    return (x_up.dtype == torch.bfloat16 and x_up.device == x.device and tuple(x_up.shape) == tuple(x.shape)
            and x_up.stride(-1) == 1 and x_up.data_ptr() % 16 == 0)


def _aligned_row(t: torch.Tensor, n: int) -> bool:
    """t: n contiguous bf16 values starting on 16 bytes."""
    return t.dtype == torch.bfloat16 and t.numel() == n and t.is_contiguous() and t.data_ptr() % 16 == 0


def _cuda_row(x: torch.Tensor, k: int) -> bool:
    """x: one [1, k] bf16 CUDA row with unit stride (what the fold entries take as the GEMV's x)."""
    return (x.is_cuda and x.dim() == 2 and tuple(x.shape) == (1, k) and x.dtype == torch.bfloat16
            and x.stride(-1) == 1)


def _served(x: torch.Tensor, weight) -> "dict | None":
    """ops.prepared(weight) where this kernel `serves` x with it, else None."""
    p = ops.prepared(weight)
    return p if serves(x, p) else None


def _out(x: torch.Tensor, p: dict) -> torch.Tensor:
    """A new [1, N] bf16 output on x's device."""
    return torch.empty(1, p["N"], dtype=torch.bfloat16, device=x.device)


def silu_mul_linear(gate: torch.Tensor, up: torch.Tensor, weight) -> "torch.Tensor | None":
    """The MLP's y = down(silu(gate) * up) in one launch, silu_mul folded into the GEMV's x staging, where this
    kernel serves: gate, up [1, K] bf16 CUDA row views (e.g. the halves of the fused gate+up output), weight an
    NVFP4Weight [N, K] (kernels/nvfp4/checkpoint.py). Returns y [1, N] bf16, or None (SILU_X off, more rows, or
    `serves` false): the caller then runs kernels.norm.ops.silu_mul and the linear layer. The same rounding steps
    as that pair (bf16 silu, bf16 product; expf's last bit may differ where nvcc contracts it in another context, so
    y agrees to ~1e-4 relative: tests/kernels/test_nvfp4_bt.py). H200 gain: kernels/nvfp4/NOTES.md session 13."""
    if not (SILU_X and _cuda_row(gate, weight.shape[1]) and _pairs_with(gate, up)):
        return None
    p = _served(gate, weight)
    return None if p is None else gemv_bt(gate, p, _out(gate, p), x_up=up, **dispatch(gate, p))


def serves(x: torch.Tensor, p: dict) -> bool:
    """ops.gemv's choice of this kernel: GEMV_BT, x of one row on a Hopper GPU with ops.PDL on (v12 was measured
    so), `applies`, at least one tile per SM and imbalance <= MAX_IMBALANCE, and the scale words already built
    (gemv_bc.prepared_bc) unless no CUDA graph is being captured."""
    if not (GEMV_BT and ops.PDL and x.is_cuda and x.shape[0] == 1 and ops._hopper(x.device)):
        return False
    if "wsb" not in p and torch.cuda.is_current_stream_capturing():
        return False
    sms = _compile.num_sms(x.device)
    return applies(x, p, sms) and p["Np"] // 16 >= sms and imbalance(p, sms) <= MAX_IMBALANCE


def dispatch(x: torch.Tensor, p: dict) -> dict:
    """ops.gemv's launch options for a weight this kernel serves: v14's ring config where gemv_btt.choice names one,
    else v12 at dispatch_unroll."""
    return {"unroll": dispatch_unroll(p), "tma": gemv_btt.choice(p, _compile.num_sms(x.device))}


def dispatch_unroll(p: dict) -> int:
    """ops.gemv's unroll: 2 below BT_U3_CHUNKS fragments, 3 from there."""
    return 2 if (p["Np"] // 16) * p["Kc"] < BT_U3_CHUNKS else 3


def rms_norm_linear(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                    weight) -> "tuple | None":
    """The decoder layer's h = x + residual, y = RMSNorm(h) (zero-centred, kernels.norm.ops.rms_norm) and the first
    projection after it, out = y W^T, in one launch where this kernel serves: x, residual [1, K] bf16 CUDA rows,
    norm_weight [K] bf16, weight an NVFP4Weight [N, K]. Returns (out [1, N], y [1, K], h [1, K]) bf16, or None
    (NORM_X off, more rows, misaligned, or `serves` false): the caller then runs the norm and the linear layer. y
    and h are written for the residual stream and the layer's other readers of y; y can differ from the norm
    kernel's in the last bit of a few elements (the sum of squares is added in another order)."""
    k = weight.shape[1]
    if not (NORM_X and _cuda_row(x, k) and x.data_ptr() % 16 == 0 and _pairs_with(x, residual)
            and _aligned_row(norm_weight, k)):
        return None
    p = _served(x, weight)
    if p is None:
        return None
    y, h = torch.empty_like(x), torch.empty_like(x)
    return gemv_bt(x, p, _out(x, p), norm=(residual, norm_weight, eps, h, y), **dispatch(x, p)), y, h


def gated_norm_linear(x: torch.Tensor, z: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                      weight) -> "torch.Tensor | None":
    """The GDN layer's out_proj(gated_rms_norm(x, z)) over 128-wide heads in one launch where this kernel serves: x
    [1, HV * 128] bf16 CUDA (the recurrence's output, contiguous), z [1, HV * 128] bf16 (the gate, a row view of the
    fused in_proj output), norm_weight [128] bf16, weight an NVFP4Weight [N, HV * 128]. Returns out [1, N] bf16, or
    None (GNORM_X off, more rows, misaligned, or `serves` false): the caller then runs the norm and out_proj. The
    normalised x can differ from kernels.norm.ops.gated_rms_norm's in the last bit of a few elements (mean(x^2)
    summed in another order)."""
    if not (GNORM_X and _cuda_row(x, weight.shape[1]) and _pairs_with(x, z) and x.shape[1] % GATED_HEAD == 0
            and _aligned_row(norm_weight, GATED_HEAD)):
        return None
    p = _served(x, weight)
    return None if p is None else gemv_bt(x, p, _out(x, p), gated=(z, norm_weight, eps), **dispatch(x, p))
