"""Worker process (GPU path): a gated-attention layer's per-token work around the attention, one launch each
(prologue.cu; its header gives the mapping and the rounding): q/k RMSNorm + partial RoPE + the KV-cache write
(replacing ~20 torch kernels a layer at decode), and the sigmoid output gate.

Letters: T tokens, nH query heads, nKV kv heads, HD head dim, ROT rotary dims. The references are the torch code in
worker/layers/attention.py (RMSNorm._norm, RotaryEmbedding.apply, index_put into the pools, `out * sigmoid(gate)`).
CuPy and numpy are imported lazily: this module imports on a CPU-only machine.
"""
import functools
import os

import torch

from kernels import _compile, _pdl

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prologue.cu")
HEAD_DIMS = (64, 128, 256)
ENABLED = os.environ.get("SPARKINFER_ATTN_PROLOGUE", "1") == "1"


@functools.lru_cache(maxsize=None)
def _kernel(name: str, head_dim: int):
    import cupy

    with open(SOURCE, encoding="utf-8") as f:
        module = cupy.RawModule(code=f.read(), options=_compile.OPTIONS + (f"-DHD={head_dim}",))
    return module.get_function(name)


def _launch(name: str, head_dim: int, grid: int, block: int, args: tuple) -> None:
    _pdl.launch_on_stream(_kernel(name, head_dim), (grid,), (block,), args, pdl=_pdl.supported())


def _rows_ok(t: torch.Tensor, align: int) -> bool:
    return t.stride(-1) == 1 and t.data_ptr() % align == 0 and (t.shape[0] <= 1 or t.stride(0) % (align // 2) == 0)


def serves(query_gate: torch.Tensor, key: torch.Tensor, value: torch.Tensor, k_pool: torch.Tensor,
           rotary_dim: int) -> bool:
    """True when qk_norm_rope_cache and gate_mul can run: CUDA bf16 everywhere, HD in HEAD_DIMS, query_gate rows
    16-byte aligned (gate_mul's loads), key / value rows aligned to HD / 16 bytes, contiguous bf16 pools,
    rotary_dim even, <= HD, and rotary_dim / 2 a multiple of HD / 32 (prologue.cu)."""
    if not ENABLED or not query_gate.is_cuda:
        return False
    head_dim = k_pool.shape[-1]
    dpl = head_dim // 32
    tensors = (query_gate, key, value, k_pool)
    return (all(t.dtype == torch.bfloat16 for t in tensors) and head_dim in HEAD_DIMS and k_pool.is_contiguous()
            and 0 < rotary_dim <= head_dim and rotary_dim % 2 == 0 and (rotary_dim // 2) % dpl == 0
            and _rows_ok(query_gate, 16) and all(_rows_ok(t, 2 * dpl) for t in (key, value)))


def gate_serves(attn: torch.Tensor, query_gate: torch.Tensor) -> bool:
    """True when gate_mul can run on attn [T, nH, HD] and query_gate [T, nH, 2 HD]: CUDA bf16, HD in HEAD_DIMS,
    each head's query and gate contiguous, query_gate rows 16-byte aligned (the kernel's loads)."""
    if not ENABLED or not attn.is_cuda or attn.dim() != 3 or query_gate.dim() != 3:
        return False
    head_dim = attn.shape[-1]
    return (attn.dtype == query_gate.dtype == torch.bfloat16 and head_dim in HEAD_DIMS
            and query_gate.shape[-1] == 2 * head_dim and query_gate.stride(1) == 2 * head_dim
            and _rows_ok(query_gate, 16))


def qk_norm_rope_cache(query_gate, key, value, q_norm, k_norm, eps: float, cos, sin, slot_mapping, k_pool, v_pool):
    """query_gate [T, nH, 2 HD] (each head's query then gate), key, value [T, nKV HD] bf16 (row-strided views
    allowed); q_norm, k_norm [HD] bf16 (zero-centred weights); cos, sin [T, ROT] bf16; slot_mapping [T] int64 (flat
    pool index; < 0 skips the write); k_pool, v_pool [..., nKV, HD] bf16 contiguous, written in place with the
    normalised, rotated key and the value. Returns the normalised, rotated query [T, nH, HD] bf16 contiguous."""
    num_tokens, num_heads, head_dim = query_gate.shape[0], query_gate.shape[1], k_pool.shape[-1]
    q_out = torch.empty(num_tokens, num_heads, head_dim, dtype=torch.bfloat16, device=query_gate.device)
    if num_tokens == 0:
        return q_out
    grid, block, args = launch_args(query_gate, key, value, q_norm, k_norm, eps, cos.contiguous(), sin.contiguous(),
                                    slot_mapping.contiguous(), q_out, k_pool, v_pool)
    _launch("attn_qk_norm_rope_cache", head_dim, grid, block, args)
    return q_out


# Where launch_args puts the addresses a step plan changes per layer (kernels/attention/step_plan.py)
ARG_QUERY_GATE, ARG_KEY, ARG_VALUE, ARG_Q_NORM, ARG_K_NORM, ARG_K_POOL, ARG_V_POOL = 0, 2, 4, 6, 7, 13, 14


def launch_args(query_gate, key, value, q_norm, k_norm, eps: float, cos, sin, slot_mapping, q_out, k_pool,
                v_pool) -> tuple:
    """attn_qk_norm_rope_cache's (grid, block, args) for qk_norm_rope_cache's tensors (cos, sin, slot_mapping
    contiguous) and its output q_out [T, nH, HD]."""
    import numpy as np

    num_tokens, num_heads, num_kv = query_gate.shape[0], query_gate.shape[1], k_pool.shape[-2]
    ptr = lambda t: np.uint64(t.data_ptr())  # noqa: E731
    args = (ptr(query_gate), np.int64(query_gate.stride(0)), ptr(key), np.int64(key.stride(0)), ptr(value),
            np.int64(value.stride(0)), ptr(q_norm), ptr(k_norm), ptr(cos), ptr(sin), np.int64(cos.stride(0)),
            ptr(slot_mapping), ptr(q_out), ptr(k_pool), ptr(v_pool), np.int32(num_tokens),
            np.int32(num_heads), np.int32(num_kv), np.int32(cos.shape[-1]), np.float32(eps))
    items = num_tokens * (num_heads + 2 * num_kv)
    return -(-items // 4), 128, args


def gate_mul(attn: torch.Tensor, query_gate: torch.Tensor) -> torch.Tensor:
    """attn [T, nH, HD] bf16 contiguous, query_gate [T, nH, 2 HD] as qk_norm_rope_cache -> [T, nH HD] bf16
    = bf16(attn * bf16(sigmoid(gate)))."""
    import numpy as np

    num_tokens, num_heads, head_dim = attn.shape
    out = torch.empty(num_tokens, num_heads * head_dim, dtype=torch.bfloat16, device=attn.device)
    if num_tokens:
        attn = attn.contiguous()
        args = (np.uint64(attn.data_ptr()), np.uint64(query_gate.data_ptr()), np.int64(query_gate.stride(0)),
                np.uint64(out.data_ptr()), np.int32(num_tokens), np.int32(num_heads))
        _launch("attn_gate_mul", head_dim, -(-out.numel() // 8 // 256), 256, args)
    return out
