"""Worker process (GPU path): Gated DeltaNet ops over the state pools, CUDA kernels via CuPy (sm_90).

Letters as fla: T packed tokens, N sequences, S pool slots, H q/k heads, HV v heads (v-head j reads key head
j // (HV // H)), K = V = 128 head dims, C = 2*H*K + HV*V conv channels (q | k | v), Kc = 4 conv width.
Math: model-spec 1.7 / 1.8; the plain-torch oracle is kernels/gdn/naive.py.
Pools (one layer's view; the slot stride may be larger, e.g. pool[:, layer] of [S, L, ...]):
  state_pool [S, HV, K, V] float32 or bfloat16 (chosen at start), read and written in place by slot id;
  conv_pool  [S, C, Kc-1] float32 or bfloat16: the previous Kc-1 pre-conv inputs, oldest first.
slot_ids [N] int32 on the device; a negative id means "no slot": zero initial state, nothing written back
(decode: the row is skipped, its output is left unwritten, for CUDA-graph padding).
Inputs a, b are the raw per-head gate projections [T, HV] bf16; the kernels compute
g = -exp(A_log) * softplus(a + dt_bias) and beta = sigmoid(b), l2-normalise q and k, and scale q by K^-0.5.
Nothing here imports torch, numpy or cupy at module import time.
"""
from kernels.gdn import _decode, _launch

HEAD_DIM = _launch.HEAD_DIM
GdnKernelError = _launch.GdnKernelError


def _scale(scale):
    return HEAD_DIM ** -0.5 if scale is None else float(scale)


def fused_recurrent_decode(q, k, v, a, b, A_log, dt_bias, state_pool, slot_ids, scale=None, out=None,
                           variant=None):
    """One decode token for each of N sequences: gating, q/k l2norm and scale fused, state updated in place.

    q, k [N, H, K] bf16 and v [N, HV, V] bf16 (token stride free, rows contiguous: views into the conv output
    work); a, b [N, HV] bf16 raw gates; A_log, dt_bias [HV] float32; state_pool [S, HV, K, V] float32/bf16;
    slot_ids [N] int32; out: optional contiguous [N, HV, V] bf16 or float32 to write into.
    Returns o [N, HV, V] (bf16 by default; before the gated RMSNorm).
    Kernel: recurrent.cu, one pass over the state (read once, written once). variant: a name from
    _decode.DECODE_VARIANTS (None: the default for the pool's dtype, _decode.decode_variant).
    """
    return _decode.recurrent_decode(q, k, v, a, b, A_log, dt_bias, state_pool, slot_ids, _scale(scale), out,
                                    variant)


def conv_decode(mixed_qkv, conv_weight, conv_pool, slot_ids):
    """Causal conv1d update + SiLU for one token per sequence (companion kernel of the decode step).

    mixed_qkv [N, C] bf16 (pre-conv q|k|v); conv_weight [C, Kc] or [C, 1, Kc]; conv_pool [S, C, Kc-1]
    updated in place; slot_ids [N] int32. Returns y [N, C] bf16.
    """
    return _launch.conv_decode(mixed_qkv, conv_weight, conv_pool, slot_ids)


def _split_qkv(y, num_k_heads: int, num_v_heads: int):
    """y [T, C] -> views q, k [T, H, K] and v [T, HV, V] (no copy)."""
    key_dim = num_k_heads * HEAD_DIM
    q = y[:, :key_dim].unflatten(1, (num_k_heads, HEAD_DIM))
    k = y[:, key_dim:2 * key_dim].unflatten(1, (num_k_heads, HEAD_DIM))
    v = y[:, 2 * key_dim:].unflatten(1, (num_v_heads, HEAD_DIM))
    return q, k, v


def gdn_decode(mixed_qkv, a, b, conv_weight, A_log, dt_bias, conv_pool, state_pool, slot_ids, num_k_heads,
               scale=None):
    """The GDN layer's decode core: conv_decode then fused_recurrent_decode (2 launches).

    mixed_qkv [N, C] bf16 with C = 2*H*K + HV*V; a, b [N, HV] bf16; pools and slot_ids as in the module doc.
    Returns o [N, HV, V] bf16.
    """
    y = conv_decode(mixed_qkv, conv_weight, conv_pool, slot_ids)
    q, k, v = _split_qkv(y, num_k_heads, state_pool.shape[1])
    return fused_recurrent_decode(q, k, v, a, b, A_log, dt_bias, state_pool, slot_ids, scale)


def prefill_tables(cu_seqlens, device):
    """Chunk tables for a packed batch: cu_seqlens [N+1] (list, CPU tensor or device tensor; a device tensor
    costs one sync). Reuse the result for conv_prefill and chunk_prefill of every layer of the step."""
    bounds = cu_seqlens if isinstance(cu_seqlens, (list, tuple)) else [int(c) for c in cu_seqlens.tolist()]
    return _launch.chunk_tables(list(bounds), device)


def _int32_on(x, device, default_len=None):
    import torch

    if x is None:
        return torch.ones(default_len, dtype=torch.int32, device=device)
    return torch.as_tensor(x, device=device).to(torch.int32).contiguous()


def conv_prefill(mixed_qkv, conv_weight, conv_pool, slot_ids, cu_seqlens, has_initial_state=None, tables=None):
    """Causal conv1d + SiLU over packed sequences, continuing each sequence's conv state and writing it back.

    mixed_qkv [T, C] bf16; cu_seqlens [N+1]; has_initial_state [N] (bool/int; None = all True; False = start
    from zeros, as for a fresh prompt); tables from prefill_tables (built here when None). Returns y [T, C].
    """
    dev = mixed_qkv.device
    tables = tables or prefill_tables(cu_seqlens, dev)
    num_seqs = tables[1].numel() - 1
    return _launch.conv_prefill(mixed_qkv, conv_weight, conv_pool, _int32_on(slot_ids, dev),
                                _int32_on(cu_seqlens, dev), _int32_on(has_initial_state, dev, num_seqs), tables)


def chunk_prefill(q, k, v, a, b, A_log, dt_bias, state_pool, slot_ids, cu_seqlens, has_initial_state=None,
                  scale=None, tables=None, out=None):
    """Chunked (64, WY form) gated delta rule over packed sequences; initial state from each sequence's slot
    (zeros where has_initial_state[n] is False), final state written back to the slot.

    q, k [T, H, K] bf16, v [T, HV, V] bf16 (rows contiguous, token stride free); a, b [T, HV] bf16 raw gates;
    A_log, dt_bias [HV] float32; state_pool [S, HV, K, V] float32/bf16; slot_ids [N] int32; cu_seqlens [N+1].
    out: optional contiguous [T, HV, V] bf16 or float32. Returns o [T, HV, V] (bf16 by default).
    Kernels: chunk.cu (per-chunk WY prep, parallel) then chunk_state.cu (sequential over chunks, 2 blocks per
    (sequence, v-head)). Workspace about T * (4*H*K + 264*HV) bytes (fp16 qn, kn; f32 gc, beta; fp16 T, P),
    freed on return.
    """
    dev = q.device
    tables = tables or prefill_tables(cu_seqlens, dev)
    num_seqs = tables[1].numel() - 1
    return _launch.chunk_gdn(q, k, v, a, b, A_log, dt_bias, state_pool, _int32_on(slot_ids, dev),
                             _int32_on(has_initial_state, dev, num_seqs), _scale(scale), tables, out)


def gdn_prefill(mixed_qkv, a, b, conv_weight, A_log, dt_bias, conv_pool, state_pool, slot_ids, cu_seqlens,
                num_k_heads, has_initial_state=None, scale=None, tables=None):
    """The GDN layer's prefill core: conv_prefill then chunk_prefill (3 launches). Shapes as above.
    Returns o [T, HV, V] bf16."""
    tables = tables or prefill_tables(cu_seqlens, mixed_qkv.device)
    y = conv_prefill(mixed_qkv, conv_weight, conv_pool, slot_ids, cu_seqlens, has_initial_state, tables)
    q, k, v = _split_qkv(y, num_k_heads, state_pool.shape[1])
    return chunk_prefill(q, k, v, a, b, A_log, dt_bias, state_pool, slot_ids, cu_seqlens, has_initial_state,
                         scale, tables)
