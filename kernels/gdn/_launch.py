"""Worker process (GPU path): argument checks and launches of the Gated DeltaNet CUDA kernels on torch tensors.

Letters as fla: T tokens, N sequences, S pool slots, H q/k heads, HV v heads, K = V = 128, C conv channels.
Kernels (see each .cu header for the grid/block mapping): conv.cu, chunk.cu, chunk_state.cu here; the recurrent decode
(recurrent.cu, recurrent_tma.cu) in _decode.py.
numpy and torch are imported lazily so that `kernels.gdn` imports on a CPU-only machine.
"""
from kernels.gdn import _build

HEAD_DIM = 128
CHUNK = 64
# gdn_conv_prefill threads per (chunk, 8 channels), each sliding over ceil(CHUNK / pieces) tokens (conv.cu's
# header): (most chunks in the step, pieces) in order, 1 past the last. H200 session 14 device run 2, kernel us on
# the 27B layer (C = 10240) at 1 / 2 / 4 / 8 pieces: T = 512 48.6 / 31.0 / 24.5 / 26.6, T = 2048 77.5 / 81.1 /
# 74.4 / 83.1, T = 8192 229.1 / 219.1 / 250.2 / 307.6 (more pieces re-read the window's KC - 1 tokens and the
# weights; one piece chains its loads). CONV_PIECES set: every step uses that many (tests, bench A/B)
CONV_PIECE_STEPS = ((32, 4), (128, 2))
CONV_PIECES = 0
# gdn_chunk_prep splits each (chunk, key head) block by value head where its grid is this small (prep_splits);
# PREP_SPLITS set: that many (tests, bench A/B). H200 measurement: kernels/gdn/NOTES.md session 14
PREP_SPLIT_BLOCKS = 256
PREP_SPLITS = 0
CONV_WIDTH = 4
GROUP_MAX = 8
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
    """A tensor's device address as numpy uint64 (a kernel argument)."""
    return _np().uint64(t.data_ptr())


def i64(x):
    """x as numpy int64 (a kernel argument)."""
    return _np().int64(x)


def i32(x):
    """x as numpy int32 (a kernel argument)."""
    return _np().int32(x)


def f32(x):
    """x as numpy float32 (a kernel argument)."""
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
    _build.launch(*conv_decode_launch(x, w, conv_pool, slot_ids.contiguous(), y, defines))
    return y


CONV_DECODE_X, CONV_DECODE_WEIGHT, CONV_DECODE_POOL = 0, 2, 3  # where conv_decode_launch puts those addresses


def conv_decode_launch(x, w, conv_pool, slot_ids, y, defines: tuple) -> tuple:
    """gdn_conv_decode's (kernel, grid, block, args) for conv_decode's checked tensors (w float32 [C, Kc]
    contiguous, slot_ids int32 contiguous, defines _conv_define's) writing y [N, C] bf16."""
    num_seqs, channels = x.shape
    fn = _build.kernel("conv.cu", "gdn_conv_decode", defines)
    args = (ptr(x), i64(x.stride(0)), ptr(w), ptr(conv_pool), i64(conv_pool.stride(0)), ptr(slot_ids), ptr(y),
            i32(channels))
    return fn, ((channels // 8 + 127) // 128, num_seqs), (128,), args


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
    args = conv_prefill_args(x, w, conv_pool, slot_ids, chunks, cu_seqlens, has_init, y)
    _build.launch(fn, ((channels // 8 + 127) // 128, num_chunks, conv_pieces(num_chunks)), (128,), args)
    return y


CONV_MIXED, CONV_WEIGHT, CONV_POOL = 0, 2, 3  # where conv_prefill_args puts those addresses


def conv_prefill_args(x, w, conv_pool, slot_ids, chunks, cu_seqlens, has_init, y) -> tuple:
    """gdn_conv_prefill's arguments (conv.cu) for conv_prefill's checked tensors: x [T, C] bf16, w float32 [C, Kc],
    slot_ids / cu_seqlens / has_init int32, chunks int32 [NC, 4] (chunk_tables), y [T, C] bf16 written."""
    return (ptr(x), i64(x.stride(0)), ptr(w), ptr(conv_pool), i64(conv_pool.stride(0)), ptr(slot_ids), ptr(chunks),
            ptr(cu_seqlens), ptr(has_init), ptr(y), i32(x.shape[1]))


def conv_pieces(num_chunks: int) -> int:
    """gdn_conv_prefill's pieces per chunk for a step of num_chunks chunks: CONV_PIECES, else CONV_PIECE_STEPS'."""
    if CONV_PIECES:
        return CONV_PIECES
    return next((pieces for most, pieces in CONV_PIECE_STEPS if num_chunks <= most), 1)


def chunk_gdn(q, k, v, a, b, A_log, dt_bias, state_pool, slot_ids, has_init, scale, tables, out=None):
    """Chunked prefill over packed sequences; see ops.chunk_prefill. Returns o [T, HV, V] (out's dtype)."""
    ws = chunk_setup(q, k, v, a, b, A_log, dt_bias, state_pool, tables, out)
    chunk_prep(ws, q, k, a, b, A_log, dt_bias, scale, tables)
    chunk_state(ws, v, state_pool, slot_ids, has_init, tables)
    return ws["o"]


def chunk_setup(q, k, v, a, b, A_log, dt_bias, state_pool, tables, out=None) -> dict:
    """Checks and workspace of the chunked prefill: o, fp16 qn/kn [T, H, K], f32 gc/beta [T, HV],
    fp16 T/P [NC, HV, 64, 64] (workspace)."""
    num_tokens, num_k_heads, num_v_heads = q.shape[0], q.shape[1], v.shape[1]
    for t, name, heads in ((q, "q", num_k_heads), (k, "k", num_k_heads), (v, "v", num_v_heads)):
        _check_rows(t, name, heads * HEAD_DIM)
    _need(q.stride(0) == k.stride(0), "q and k must share a token stride")
    _need(num_v_heads % num_k_heads == 0 and num_v_heads // num_k_heads <= GROUP_MAX, "HV / H must be 1..8")
    _check_gates(a, b, A_log, dt_bias, num_v_heads)
    _check_pool(state_pool, num_v_heads)
    o, out_define = _output(out, (num_tokens, num_v_heads, HEAD_DIM), q.device)
    return dict(workspace(num_tokens, num_k_heads, num_v_heads, tables[2], q.device), o=o, out_define=out_define)


def workspace(num_tokens: int, num_k_heads: int, num_v_heads: int, num_chunks: int, device) -> dict:
    """The chunked prefill's scratch: fp16 qn / kn [T, H, K], f32 gc / beta [T, HV], fp16 tmat / pmat
    [max(NC, 1), HV, 64, 64], and H / HV."""
    import torch

    qn = torch.empty(num_tokens, num_k_heads, HEAD_DIM, dtype=torch.float16, device=device)
    gc = torch.empty(num_tokens, num_v_heads, dtype=torch.float32, device=device)
    tmat = torch.empty(max(num_chunks, 1), num_v_heads, CHUNK, CHUNK, dtype=torch.float16, device=device)
    return dict(qn=qn, kn=torch.empty_like(qn), gc=gc, beta=torch.empty_like(gc), tmat=tmat,
                pmat=torch.empty_like(tmat), H=num_k_heads, HV=num_v_heads)


def chunk_prep(ws, q, k, a, b, A_log, dt_bias, scale, tables):
    """Launch gdn_chunk_prep (chunk.cu): grid (NC, H, prep_splits(...)), 128 threads."""
    chunks, _, num_chunks = tables
    if num_chunks == 0:
        return
    fn = _build.kernel("chunk.cu", "gdn_chunk_prep", (), PREP_SMEM)
    args = chunk_prep_args(ws, q, k, a, b, A_log, dt_bias, scale, chunks)
    splits = prep_splits(num_chunks * ws["H"], ws["HV"] // ws["H"])
    _build.launch(fn, (num_chunks, ws["H"], splits), (128,), args, PREP_SMEM)


def prep_splits(blocks: int, group: int) -> int:
    """Blocks a (chunk, key head) of gdn_chunk_prep is split into, each taking a share of its `group` value heads:
    PREP_SPLITS where set (capped at group), else all `group` while the unsplit grid of `blocks` is at most
    PREP_SPLIT_BLOCKS, else 1."""
    if PREP_SPLITS:
        return min(PREP_SPLITS, group)
    return group if blocks <= PREP_SPLIT_BLOCKS else 1


def chunk_state(ws, v, state_pool, slot_ids, has_init, tables):
    """Launch gdn_chunk_state (chunk_state.cu): grid (V / 64, HV, N), 256 threads, sequential over chunks."""
    chunks, seq_chunks, _ = tables
    defines = _state_define(state_pool) + (ws["out_define"],)
    fn = _build.kernel("chunk_state.cu", "gdn_chunk_state", defines, STATE_SMEM)
    args = chunk_state_args(ws, v, state_pool, slot_ids, has_init, chunks, seq_chunks)
    _build.launch(fn, (HEAD_DIM // 64, ws["HV"], seq_chunks.numel() - 1), (256,), args, STATE_SMEM)


PREP_A, PREP_B, PREP_A_LOG, PREP_DT_BIAS = 3, 4, 6, 7  # where chunk_prep_args puts those addresses
STATE_POOL, STATE_OUT = 8, 14  # where chunk_state_args puts those addresses


def chunk_prep_args(ws, q, k, a, b, A_log, dt_bias, scale, chunks) -> tuple:
    """gdn_chunk_prep's arguments (chunk.cu): q / k [T, H, K] bf16 sharing a token stride, gates and chunks as
    chunk_prep's, ws the workspace (qn, kn, gc, beta, tmat, pmat written)."""
    return (ptr(q), ptr(k), i64(q.stride(0)), ptr(a), ptr(b), i64(a.stride(0)), ptr(A_log), ptr(dt_bias),
            ptr(chunks), ptr(ws["qn"]), ptr(ws["kn"]), ptr(ws["gc"]), ptr(ws["beta"]), ptr(ws["tmat"]),
            ptr(ws["pmat"]), i32(ws["H"]), i32(ws["HV"]), f32(scale))


def chunk_state_args(ws, v, state_pool, slot_ids, has_init, chunks, seq_chunks) -> tuple:
    """gdn_chunk_state's arguments (chunk_state.cu): v [T, HV, V] bf16, the state pool, int32 slot_ids / has_init
    [N], chunks / seq_chunks (chunk_tables), ws the workspace with o [T, HV, V] written."""
    return (ptr(ws["qn"]), ptr(ws["kn"]), ptr(v), i64(v.stride(0)), ptr(ws["gc"]), ptr(ws["beta"]), ptr(ws["tmat"]),
            ptr(ws["pmat"]), ptr(state_pool), i64(state_pool.stride(0)), ptr(slot_ids), ptr(has_init), ptr(chunks),
            ptr(seq_chunks), ptr(ws["o"]), i32(ws["H"]), i32(ws["HV"]))
