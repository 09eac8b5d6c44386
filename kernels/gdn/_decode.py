"""Worker process (GPU path): the fused recurrent decode's kernel variants, the per-batch choice among them, and
its launch (recurrent.cu, recurrent_cp.cu, recurrent_tma.cu). Argument checks and helpers: _launch.py. Letters as fla."""
import os

from kernels import _compile, _pdl
from kernels.gdn import _build
from kernels.gdn._launch import (HEAD_DIM, _check_gates, _check_pool, _check_rows, _need, _output, _state_define, f32,
                                 i32, i64, ptr)

# extra -D defines for recurrent.cu (a bench can sweep MIN_BLOCKS through this)
DECODE_EXTRA_DEFINES = []

# Decode kernel variants (recurrent.cu, recurrent_cp.cu, recurrent_tma.cu: SOURCES): name -> (entry, defines, threads
# per block, shared-memory carveout).
#   regs:   gdn_recurrent_decode, state through registers (bf16: 16-byte accesses, 77 registers, 3 blocks/SM)
#   narrow: the same with 8-byte bf16 accesses, 8 passes (64 registers, 4 blocks/SM); bf16 only
#   cp128 / cp256: gdn_recurrent_decode_cp, the 16 KB tile to shared memory by cp.async (10 / 5 blocks/SM)
# Grid (V / BV, HV, N) for all: BV = 64 columns for bf16 state (w128: 128), 32 for f32.
# H200, 27B layer, N=32 (NOTES.md, runs 4 and 6): bf16 regs 43.5 us, narrow 35.0, t128x6 32.7, cp128 50.9,
# cp256 56.7; f32 regs 58.8, cp128 86.2, cp256 80.7. All pass the oracle tests. Defaults: bf16 "auto" (t128x6 /
# w128 / tma3x2a by batch size, tma3x2a 29.95 us at N=32, session 10), f32 "auto" (regs / tma3x1 by batch size, tma3x1 57.2 us at N=32).
DECODE_VARIANTS = {
    "regs": ("gdn_recurrent_decode", (), 256, -1),
    "narrow": ("gdn_recurrent_decode", ("NARROW=1",), 256, -1),
    # t128x6: 128 threads, 16 passes of 8-byte bf16 accesses (128 B of state a thread), LEAN (v read after the
    # reduction, o stored before the update, the state kept packed: an empty asm stops the compiler keeping the
    # unpacked floats alive), 80 registers, 6 blocks/SM: 96 KB in flight per SM against narrow's 64 KB
    "t128x6": ("gdn_recurrent_decode", ("NARROW=1", "LEAN=1", "THREADS=128", "MIN_BLOCKS=6"), 128, -1),
    # w128: the same per thread, one block of 256 threads per (sequence, value head) over all 128 columns (32 lanes a
    # row piece): half the blocks, so half the prologues and barriers per byte; 80 registers, 3 blocks/SM, 96 KB
    "w128": ("gdn_recurrent_decode", ("NARROW=1", "NARROW_TPR=32", "LEAN=1", "THREADS=256", "MIN_BLOCKS=3"), 256, -1),
    # tmaSxB (recurrent_tma.cu): persistent blocks, each 32 KB (bf16) / 64 KB (f32) state tile one bulk copy into a
    # ring of S shared-memory stages (S - 1 items ahead) and one bulk store back; B blocks per SM
    "tma3x2": ("gdn_recurrent_decode_tma", ("STAGES=3", "MIN_BLOCKS=2"), 256, 100),
    "tma6x1": ("gdn_recurrent_decode_tma", ("STAGES=6", "MIN_BLOCKS=1"), 256, 100),
    "tma3x1": ("gdn_recurrent_decode_tma", ("STAGES=3", "MIN_BLOCKS=1"), 256, 100),
    # ...a: STAGE_AHEAD, the next item's inputs staged while this item's columns finish (no barrier before an item):
    # bf16 N = 32 29.95 us against 30.63 (tma3x2) and 30.78 (w128), session 10 run 2; with f32 state (tma3x1 with it)
    # 55.3 against 54.4, not kept
    "tma3x2a": ("gdn_recurrent_decode_tma", ("STAGES=3", "MIN_BLOCKS=2", "STAGE_AHEAD=1"), 256, 100),
    # tma3x2c: timing diagnostic, the tiles go back unchanged (COPY_ONLY: wrong results, benches only)
    "tma3x2c": ("gdn_recurrent_decode_tma", ("STAGES=3", "MIN_BLOCKS=2", "COPY_ONLY=1"), 256, 100),
    "cp128": ("gdn_recurrent_decode_cp", ("CP_THREADS=128",), 128, 100),
    "cp256": ("gdn_recurrent_decode_cp", ("CP_THREADS=256",), 256, 100),
}
# the source of each entry
SOURCES = {"gdn_recurrent_decode": "recurrent.cu", "gdn_recurrent_decode_cp": "recurrent_cp.cu",
           "gdn_recurrent_decode_tma": "recurrent_tma.cu"}
WIDE_MIN_SEQS = 16  # "auto" (the bf16 default): t128x6 below this many sequences, w128 from it ...
TMA_MIN_SEQS = 32  # ... and tma3x2a from this many (measured at 32 and 64; w128 stays ahead at 8)
BF16_ONLY = ("narrow", "t128x6", "w128", "tma3x2", "tma3x2a", "tma6x1", "tma3x2c")
# value columns per block where a variant differs from its dtype's default (bf16 64, f32 32)
DECODE_BLOCK_V = {"w128": 128}
# launch gdn_recurrent_decode (recurrent.cu) and gdn_recurrent_decode_tma (recurrent_tma.cu) with programmatic
# dependent launch: their blocks load their state slots while the kernel before finishes, then wait for it
# (griddepcontrol.wait) before reading q, k, v, a, b or writing anything. The slot ids and the state must not be
# written by the kernel launched just before (in the model: the conv kernel, which writes neither).
DECODE_PDL = os.environ.get("SPARKINFER_GDN_PDL", "1") == "1"
# chosen per state dtype; SPARKINFER_GDN_DECODE_BF16 / _F32 name one variant for every batch size (the old kernel
# stays selectable as "regs")
DECODE_VARIANT = {
    "bfloat16": os.environ.get("SPARKINFER_GDN_DECODE_BF16", "auto"),
    "float32": os.environ.get("SPARKINFER_GDN_DECODE_F32", "auto"),
}

def decode_variant(state_dtype, num_seqs: int = 1) -> str:
    """Name of the DECODE_VARIANTS entry used for a state pool of `state_dtype` and a batch of num_seqs sequences:
    "auto" (the default) is, below WIDE_MIN_SEQS sequences / from there, t128x6 / w128 for bf16 state (H200,
    session 2: N=32 32.2 vs 32.6 us, N=64 58.0 vs 60.3; N=1 3.9 vs 3.1), tma3x2a from TMA_MIN_SEQS (session 10 runs
    1-2: N=32 29.95 vs 30.78 us, N=64 55.8-56.5 vs 56.6-57.0; N=8 9.90 vs 9.57), and regs / tma3x1 for f32 state
    (session 3: N=32 57.2 vs 58.9 us, N=64 109.9 vs 112.9; N=1 6.0 vs 4.9)."""
    dtype = str(state_dtype).split(".")[-1]
    name = DECODE_VARIANT[dtype]
    if name == "auto":
        wide = num_seqs >= WIDE_MIN_SEQS
        bf16 = "tma3x2a" if num_seqs >= TMA_MIN_SEQS else "w128" if wide else "t128x6"
        name = bf16 if dtype == "bfloat16" else ("tma3x1" if wide else "regs")
    _need(name in DECODE_VARIANTS, f"unknown GDN decode variant {name!r} (one of {sorted(DECODE_VARIANTS)})")
    _need(name not in BF16_ONLY or str(state_dtype).endswith("bfloat16"),
          f"the {name} decode variant is bf16-only")
    return name


def recurrent_decode(q, k, v, a, b, A_log, dt_bias, state_pool, slot_ids, scale, out=None, variant=None, pdl=None):
    """One decode token per sequence; see ops.fused_recurrent_decode. Returns o [N, HV, V] (out's dtype).
    variant: a DECODE_VARIANTS name (None: decode_variant(state_pool.dtype, N)); pdl: programmatic dependent launch
    of gdn_recurrent_decode and gdn_recurrent_decode_tma (None: DECODE_PDL on a Hopper GPU)."""
    import torch

    num_seqs, num_k_heads, num_v_heads = q.shape[0], q.shape[1], v.shape[1]
    _check_rows(q, "q", num_k_heads * HEAD_DIM)
    _check_rows(k, "k", num_k_heads * HEAD_DIM)
    _check_rows(v, "v", num_v_heads * HEAD_DIM)
    _need(q.stride(0) == k.stride(0), "q and k must share a token stride")
    _check_gates(a, b, A_log, dt_bias, num_v_heads)
    _check_pool(state_pool, num_v_heads)
    _need(slot_ids.dtype == torch.int32 and slot_ids.numel() == num_seqs, "slot_ids must be int32 [N]")
    o, out_define = _output(out, (num_seqs, num_v_heads, HEAD_DIM), q.device)
    if num_seqs == 0:
        return o
    fn, grid, block, args, smem, pdl = recurrent_launch(q, k, v, a, b, A_log, dt_bias, state_pool,
                                                        slot_ids.contiguous(), scale, o, out_define, variant, pdl)
    if pdl:
        _pdl.launch(fn, grid, block, args, smem, _compile.current_stream().ptr)
    else:
        _build.launch(fn, grid, block, args, smem)
    return o


# where recurrent_launch puts the addresses of a, b, A_log, dt_bias and the state pool
RECURRENT_A, RECURRENT_B, RECURRENT_A_LOG, RECURRENT_DT_BIAS, RECURRENT_POOL = 5, 6, 8, 9, 10


def recurrent_launch(q, k, v, a, b, A_log, dt_bias, state_pool, slot_ids, scale, o, out_define, variant=None,
                     pdl=None) -> tuple:
    """The decode kernel's (kernel, grid, block, args, shared_mem, pdl) for recurrent_decode's checked tensors
    (slot_ids int32 contiguous) writing o [N, HV, V] (out_define: _output's); variant, pdl as recurrent_decode."""
    num_seqs, num_k_heads, num_v_heads = q.shape[0], q.shape[1], v.shape[1]
    if variant is None:
        variant = decode_variant(state_pool.dtype, num_seqs)
    entry, extra, threads, carveout = DECODE_VARIANTS[variant]
    defines = _state_define(state_pool) + (out_define,) + extra + tuple(DECODE_EXTRA_DEFINES)
    block_v = DECODE_BLOCK_V.get(variant, 64 if str(state_pool.dtype).endswith("bfloat16") else 32)
    args = (ptr(q), ptr(k), i64(q.stride(0)), ptr(v), i64(v.stride(0)), ptr(a), ptr(b), i64(a.stride(0)),
            ptr(A_log), ptr(dt_bias), ptr(state_pool), i64(state_pool.stride(0)), ptr(slot_ids),
            ptr(o), i32(num_k_heads), i32(num_v_heads), f32(scale))
    pdl = (DECODE_PDL and _compile.capability(q.device)[0] >= 9) if pdl is None else pdl
    if entry == "gdn_recurrent_decode_tma":
        return _tma_launch(entry, defines, carveout, state_pool, args + (i32(num_seqs),), num_seqs * num_v_heads) + (
            pdl,)
    fn = _build.kernel(SOURCES[entry], entry, defines, 0, carveout)
    grid = (HEAD_DIM // block_v, num_v_heads, num_seqs)
    return fn, grid, (threads,), args, 0, pdl and entry == "gdn_recurrent_decode"


def _define(defines: tuple, key: str) -> int:
    return int(next(d.split("=")[1] for d in defines if d.startswith(key + "=")))


def _tma_launch(entry, defines, carveout, state_pool, args, num_items: int) -> tuple:
    """recurrent_tma.cu: min(items, MIN_BLOCKS per SM) persistent blocks of 256 threads, STAGES tiles of dynamic
    shared memory; the bulk copies need 16-byte aligned slots. -> (kernel, grid, block, args, shared_mem)."""
    tile = HEAD_DIM * HEAD_DIM * state_pool.element_size()
    _need(state_pool.data_ptr() % 16 == 0 and state_pool.stride(0) * state_pool.element_size() % 16 == 0,
          "state pool slots must be 16-byte aligned for the tma decode")
    smem = _define(defines, "STAGES") * tile
    sms = _compile.num_sms(state_pool.device)
    fn = _build.kernel("recurrent_tma.cu", entry, defines, smem, carveout)
    return fn, (min(num_items, sms * _define(defines, "MIN_BLOCKS")),), (256,), args, smem
