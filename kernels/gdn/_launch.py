"""Worker process (GPU path): argument checks and launches of the Gated DeltaNet CUDA kernels on torch tensors.

Letters as fla: T tokens, N sequences, S pool slots, H q/k heads, HV v heads, K = V = 128, C conv channels.
Kernels (see each .cu header for the grid/block mapping): recurrent.cu, conv.cu, chunk.cu, chunk_state.cu.
numpy and torch are imported lazily so that `kernels.gdn` imports on a CPU-only machine.
"""
import os

from kernels.gdn import _build

HEAD_DIM = 128
CHUNK = 64
CONV_WIDTH = 4
GROUP_MAX = 8
# extra -D defines for recurrent.cu (the bench sweeps MIN_BLOCKS through this)
DECODE_EXTRA_DEFINES = []
# Decode kernel variants (recurrent.cu): name -> (entry, defines, threads per block, shared-memory carveout).
#   regs:   gdn_recurrent_decode, state through registers (bf16: 16-byte accesses, 77 registers, 3 blocks/SM)
#   narrow: the same with 8-byte bf16 accesses, 8 passes (64 registers, 4 blocks/SM); bf16 only
#   cp128 / cp256: gdn_recurrent_decode_cp, the 16 KB tile to shared memory by cp.async (10 / 5 blocks/SM)
# Grid (V / BV, HV, N) for all: BV = 64 columns for bf16 state (w128: 128), 32 for f32.
# H200, 27B layer, N=32 (NOTES.md, runs 4 and 6): bf16 regs 43.5 us, narrow 35.0, t128x6 32.7, cp128 50.9,
# cp256 56.7; f32 regs 58.8, cp128 86.2, cp256 80.7. All pass the oracle tests. Defaults: bf16 "auto" (t128x6 /
# w128 by batch size, w128 32.2 us at N=32), f32 "auto" (regs / tma3x1 by batch size, tma3x1 57.2 us at N=32).
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
    "cp128": ("gdn_recurrent_decode_cp", ("CP_THREADS=128",), 128, 100),
    "cp256": ("gdn_recurrent_decode_cp", ("CP_THREADS=256",), 256, 100),
}
WIDE_MIN_SEQS = 16  # "auto" (the bf16 default): t128x6 below this many sequences, w128 from it
BF16_ONLY = ("narrow", "t128x6", "w128", "tma3x2", "tma6x1")
# value columns per block where a variant differs from its dtype's default (bf16 64, f32 32)
DECODE_BLOCK_V = {"w128": 128}
# chosen per state dtype; SPARKINFER_GDN_DECODE_BF16 / _F32 name one variant for every batch size (the old kernel
# stays selectable as "regs")
DECODE_VARIANT = {
    "bfloat16": os.environ.get("SPARKINFER_GDN_DECODE_BF16", "auto"),
    "float32": os.environ.get("SPARKINFER_GDN_DECODE_F32", "auto"),
}
# chunk.cu: fp16 q/k tiles (the f32 A/T matrices overlay them) + gates
PREP_SMEM = 2 * CHUNK * (HEAD_DIM + 8) * 2 + (2 + 2 * GROUP_MAX) * CHUNK * 4
_BUF = (2 * CHUNK * (HEAD_DIM + 8) + 3 * CHUNK * (CHUNK + 8)) * 2 + 2 * CHUNK * 4
STATE_SMEM = 2 * _BUF + (3 * CHUNK + HEAD_DIM) * (64 + 8) * 2


class GdnKernelError(ValueError):
    """A tensor handed to a GDN kernel has the wrong shape, dtype, device or layout."""


def _need(cond: bool, msg: str):
    if not cond:
        raise GdnKernelError(msg)


def _np():
    import numpy

    return numpy


def ptr(t):
    return _np().uint64(t.data_ptr())


def i64(x):
    return _np().int64(x)


def i32(x):
    return _np().int32(x)


def f32(x):
    return _np().float32(x)


def _state_define(pool) -> tuple:
    import torch

    _need(pool.dtype in (torch.float32, torch.bfloat16), "state pool must be float32 or bfloat16")
    return ("STATE_BF16=%d" % (pool.dtype == torch.bfloat16),)


def _check_pool(pool, num_v_heads: int):
    """pool [S, HV, K, V]: each slot's [HV, K, V] block contiguous; the slot stride may be larger."""
    _need(pool.dim() == 4 and tuple(pool.shape[1:]) == (num_v_heads, HEAD_DIM, HEAD_DIM),
          f"state pool must be [S, {num_v_heads}, 128, 128], got {tuple(pool.shape)}")
    _need(pool.stride()[1:] == (HEAD_DIM * HEAD_DIM, HEAD_DIM, 1), "state pool slot block must be contiguous")


def _check_rows(x, name: str, row_elems: int, align: bool = True):
    """x [T, ...] bf16 with contiguous rows of `row_elems` elements; the token stride is free
    (a multiple of 8 elements, 16-byte aligned base, when `align`)."""
    import torch

    _need(x.dtype == torch.bfloat16 and x.is_cuda, f"{name} must be a CUDA bfloat16 tensor")
    if x.shape[0] == 0:
        return
    _need(x[0].numel() == row_elems and x[0].is_contiguous(), f"{name} rows must be contiguous [{row_elems}]")
    if align:
        _need(x.data_ptr() % 16 == 0 and x.stride(0) % 8 == 0, f"{name} must be 16-byte aligned per token")


def _check_gates(a, b, A_log, dt_bias, num_v_heads):
    import torch

    _check_rows(a, "a", num_v_heads, align=False)
    _check_rows(b, "b", num_v_heads, align=False)
    _need(a.stride(0) == b.stride(0), "a and b must share a token stride")
    for t, name in ((A_log, "A_log"), (dt_bias, "dt_bias")):
        _need(t.dtype == torch.float32 and t.is_contiguous() and t.numel() == num_v_heads,
              f"{name} must be a contiguous float32 [HV] tensor")


def _output(out, shape, device) -> tuple:
    """out (None: new bf16) checked as a contiguous `shape` tensor of bf16 or float32; returns (out, define)."""
    import torch

    if out is None:
        out = torch.empty(shape, dtype=torch.bfloat16, device=device)
    _need(tuple(out.shape) == tuple(shape) and out.is_contiguous(), f"out must be contiguous {tuple(shape)}")
    _need(out.dtype in (torch.bfloat16, torch.float32), "out must be bfloat16 or float32")
    return out, "OUT_F32=%d" % (out.dtype == torch.float32)


def decode_variant(state_dtype, num_seqs: int = 1) -> str:
    """Name of the DECODE_VARIANTS entry used for a state pool of `state_dtype` and a batch of num_seqs sequences:
    "auto" (the default) is, below WIDE_MIN_SEQS sequences / from there, t128x6 / w128 for bf16 state (H200,
    session 2: N=32 32.2 vs 32.6 us, N=64 58.0 vs 60.3; N=1 3.9 vs 3.1) and regs / tma3x1 for f32 state (session 3:
    N=32 57.2 vs 58.9 us, N=64 109.9 vs 112.9; N=1 6.0 vs 4.9)."""
    dtype = str(state_dtype).split(".")[-1]
    name = DECODE_VARIANT[dtype]
    if name == "auto":
        wide = num_seqs >= WIDE_MIN_SEQS
        name = ("w128" if wide else "t128x6") if dtype == "bfloat16" else ("tma3x1" if wide else "regs")
    _need(name in DECODE_VARIANTS, f"unknown GDN decode variant {name!r} (one of {sorted(DECODE_VARIANTS)})")
    _need(name not in BF16_ONLY or str(state_dtype).endswith("bfloat16"),
          f"the {name} decode variant is bf16-only")
    return name


def recurrent_decode(q, k, v, a, b, A_log, dt_bias, state_pool, slot_ids, scale, out=None, variant=None):
    """One decode token per sequence; see ops.fused_recurrent_decode. Returns o [N, HV, V] (out's dtype).
    variant: a DECODE_VARIANTS name (None: decode_variant(state_pool.dtype, N))."""
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
    if variant is None:
        variant = decode_variant(state_pool.dtype, num_seqs)
    entry, extra, threads, carveout = DECODE_VARIANTS[variant]
    defines = _state_define(state_pool) + (out_define,) + extra + tuple(DECODE_EXTRA_DEFINES)
    block_v = DECODE_BLOCK_V.get(variant, 64 if state_pool.dtype == torch.bfloat16 else 32)
    args = (ptr(q), ptr(k), i64(q.stride(0)), ptr(v), i64(v.stride(0)), ptr(a), ptr(b), i64(a.stride(0)),
            ptr(A_log), ptr(dt_bias), ptr(state_pool), i64(state_pool.stride(0)), ptr(slot_ids.contiguous()),
            ptr(o), i32(num_k_heads), i32(num_v_heads), f32(scale))
    if entry == "gdn_recurrent_decode_tma":
        _launch_tma(entry, defines, carveout, state_pool, args + (i32(num_seqs),), num_seqs * num_v_heads)
        return o
    fn = _build.kernel("recurrent.cu", entry, defines, 0, carveout)
    _build.launch(fn, (HEAD_DIM // block_v, num_v_heads, num_seqs), (threads,), args)
    return o


def _define(defines: tuple, key: str) -> int:
    return int(next(d.split("=")[1] for d in defines if d.startswith(key + "=")))


def _launch_tma(entry, defines, carveout, state_pool, args, num_items: int):
    """recurrent_tma.cu: min(items, MIN_BLOCKS per SM) persistent blocks of 256 threads, STAGES tiles of dynamic
    shared memory; the bulk copies need 16-byte aligned slots."""
    import torch

    tile = HEAD_DIM * HEAD_DIM * state_pool.element_size()
    _need(state_pool.data_ptr() % 16 == 0 and state_pool.stride(0) * state_pool.element_size() % 16 == 0,
          "state pool slots must be 16-byte aligned for the tma decode")
    smem = _define(defines, "STAGES") * tile
    sms = torch.cuda.get_device_properties(state_pool.device).multi_processor_count
    fn = _build.kernel("recurrent_tma.cu", entry, defines, smem, carveout)
    _build.launch(fn, (min(num_items, sms * _define(defines, "MIN_BLOCKS")),), (256,), args, smem)


def _conv_define(conv_pool, channels: int) -> tuple:
    import torch

    _need(conv_pool.dim() == 3 and tuple(conv_pool.shape[1:]) == (channels, CONV_WIDTH - 1),
          f"conv pool must be [S, {channels}, 3], got {tuple(conv_pool.shape)}")
    _need(conv_pool.stride()[1:] == (CONV_WIDTH - 1, 1), "conv pool slot block must be contiguous")
    _need(conv_pool.dtype in (torch.float32, torch.bfloat16), "conv pool must be float32 or bfloat16")
    _need(conv_pool.data_ptr() % 16 == 0 and conv_pool.stride(0) * conv_pool.element_size() % 16 == 0,
          "conv pool slots must be 16-byte aligned")
    return ("CONV_BF16=%d" % (conv_pool.dtype == torch.bfloat16),)


def conv_weight_f32(weight):
    """Conv weight [C, Kc] or [C, 1, Kc] (checkpoint layout) -> contiguous float32 [C, Kc]."""
    import torch

    w = weight.reshape(weight.shape[0], -1).to(torch.float32).contiguous()
    _need(w.shape[1] == CONV_WIDTH, f"conv width must be {CONV_WIDTH}")
    return w


def conv_decode(x, weight, conv_pool, slot_ids):
    """x [N, C] bf16 -> y [N, C] bf16 = silu(conv([state ; x])); conv_pool [S, C, 3] updated in place."""
    import torch

    num_seqs, channels = x.shape
    _check_rows(x, "x", channels)
    _need(channels % 8 == 0, "conv channels must be a multiple of 8")
    defines = _conv_define(conv_pool, channels)
    w = conv_weight_f32(weight)
    y = torch.empty(num_seqs, channels, dtype=torch.bfloat16, device=x.device)
    if num_seqs == 0:
        return y
    fn = _build.kernel("conv.cu", "gdn_conv_decode", defines)
    args = (ptr(x), i64(x.stride(0)), ptr(w), ptr(conv_pool), i64(conv_pool.stride(0)),
            ptr(slot_ids.contiguous()), ptr(y), i32(channels))
    _build.launch(fn, ((channels // 8 + 127) // 128, num_seqs), (128,), args)
    return y


def chunk_tables(bounds: list, device):
    """Host-side chunk list for the packed batch with sequence bounds `bounds` (cu_seqlens as a list).
    Returns chunks int32 [NC, 4] (seq, first token, length, index in seq) and seq_chunks int32 [N+1], on device."""
    import torch

    rows, seq_chunks = [], [0]
    for n in range(len(bounds) - 1):
        for j, t0 in enumerate(range(bounds[n], bounds[n + 1], CHUNK)):
            rows.append((n, t0, min(CHUNK, bounds[n + 1] - t0), j))
        seq_chunks.append(len(rows))
    chunks = torch.tensor(rows or [(0, 0, 0, 0)], dtype=torch.int32).to(device, non_blocking=True)
    return chunks, torch.tensor(seq_chunks, dtype=torch.int32).to(device, non_blocking=True), len(rows)


def conv_prefill(x, weight, conv_pool, slot_ids, cu_seqlens, has_init, tables):
    """x [T, C] bf16 packed sequences -> y [T, C] bf16; each sequence's conv state read from and written to
    its slot (from zeros where has_init[n] == 0). tables: chunk_tables(...) for cu_seqlens."""
    import torch

    num_tokens, channels = x.shape
    _check_rows(x, "x", channels)
    _need(channels % 8 == 0, "conv channels must be a multiple of 8")
    defines = _conv_define(conv_pool, channels)
    w = conv_weight_f32(weight)
    y = torch.empty(num_tokens, channels, dtype=torch.bfloat16, device=x.device)
    chunks, _, num_chunks = tables
    if num_chunks == 0:
        return y
    fn = _build.kernel("conv.cu", "gdn_conv_prefill", defines)
    args = (ptr(x), i64(x.stride(0)), ptr(w), ptr(conv_pool), i64(conv_pool.stride(0)), ptr(slot_ids),
            ptr(chunks), ptr(cu_seqlens), ptr(has_init), ptr(y), i32(channels))
    _build.launch(fn, ((channels // 8 + 127) // 128, num_chunks), (128,), args)
    return y


def chunk_gdn(q, k, v, a, b, A_log, dt_bias, state_pool, slot_ids, has_init, scale, tables, out=None):
    """Chunked prefill over packed sequences; see ops.chunk_prefill. Returns o [T, HV, V] (out's dtype)."""
    ws = chunk_setup(q, k, v, a, b, A_log, dt_bias, state_pool, tables, out)
    chunk_prep(ws, q, k, a, b, A_log, dt_bias, scale, tables)
    chunk_state(ws, v, state_pool, slot_ids, has_init, tables)
    return ws["o"]


def chunk_setup(q, k, v, a, b, A_log, dt_bias, state_pool, tables, out=None) -> dict:
    """Checks and workspace of the chunked prefill: o, fp16 qn/kn [T, H, K], f32 gc/beta [T, HV],
    fp16 T/P [NC, HV, 64, 64]."""
    import torch

    num_tokens, num_k_heads, num_v_heads = q.shape[0], q.shape[1], v.shape[1]
    for t, name, heads in ((q, "q", num_k_heads), (k, "k", num_k_heads), (v, "v", num_v_heads)):
        _check_rows(t, name, heads * HEAD_DIM)
    _need(q.stride(0) == k.stride(0), "q and k must share a token stride")
    _need(num_v_heads % num_k_heads == 0 and num_v_heads // num_k_heads <= GROUP_MAX, "HV / H must be 1..8")
    _check_gates(a, b, A_log, dt_bias, num_v_heads)
    _check_pool(state_pool, num_v_heads)
    num_chunks, dev = tables[2], q.device
    o, out_define = _output(out, (num_tokens, num_v_heads, HEAD_DIM), dev)
    qn = torch.empty(num_tokens, num_k_heads, HEAD_DIM, dtype=torch.float16, device=dev)
    gc = torch.empty(num_tokens, num_v_heads, dtype=torch.float32, device=dev)
    tmat = torch.empty(max(num_chunks, 1), num_v_heads, CHUNK, CHUNK, dtype=torch.float16, device=dev)
    return dict(o=o, out_define=out_define, qn=qn, kn=torch.empty_like(qn), gc=gc, beta=torch.empty_like(gc),
                tmat=tmat, pmat=torch.empty_like(tmat), H=num_k_heads, HV=num_v_heads)


def chunk_prep(ws, q, k, a, b, A_log, dt_bias, scale, tables):
    """Launch gdn_chunk_prep (chunk.cu): grid (NC, H), 128 threads."""
    chunks, _, num_chunks = tables
    if num_chunks == 0:
        return
    fn = _build.kernel("chunk.cu", "gdn_chunk_prep", (), PREP_SMEM)
    args = (ptr(q), ptr(k), i64(q.stride(0)), ptr(a), ptr(b), i64(a.stride(0)), ptr(A_log), ptr(dt_bias),
            ptr(chunks), ptr(ws["qn"]), ptr(ws["kn"]), ptr(ws["gc"]), ptr(ws["beta"]), ptr(ws["tmat"]),
            ptr(ws["pmat"]), i32(ws["H"]), i32(ws["HV"]), f32(scale))
    _build.launch(fn, (num_chunks, ws["H"]), (128,), args, PREP_SMEM)


def chunk_state(ws, v, state_pool, slot_ids, has_init, tables):
    """Launch gdn_chunk_state (chunk_state.cu): grid (V / 64, HV, N), 256 threads, sequential over chunks."""
    chunks, seq_chunks, _ = tables
    defines = _state_define(state_pool) + (ws["out_define"],)
    fn = _build.kernel("chunk_state.cu", "gdn_chunk_state", defines, STATE_SMEM)
    args = (ptr(ws["qn"]), ptr(ws["kn"]), ptr(v), i64(v.stride(0)), ptr(ws["gc"]), ptr(ws["beta"]),
            ptr(ws["tmat"]), ptr(ws["pmat"]), ptr(state_pool), i64(state_pool.stride(0)), ptr(slot_ids),
            ptr(has_init), ptr(chunks), ptr(seq_chunks), ptr(ws["o"]), i32(ws["H"]), i32(ws["HV"]))
    _build.launch(fn, (HEAD_DIM // 64, ws["HV"], seq_chunks.numel() - 1), (256,), args, STATE_SMEM)
