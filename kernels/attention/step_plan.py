"""Worker process (GPU path): the attention launches of a prefill or mixed step planned once, reused by every
attention layer of the step.

The piecewise prefill graphs (worker/prefill_graphs.py) run each attention layer's core eagerly between their
replays. A mixed step's core took ~740 us of host time a layer on the H200 machine's CPU (session 27, device run 8):
the fused prologue 223 (its output allocated, cos / sin / slot_mapping made contiguous, 20 arguments converted for
the driver), the paged decode kernel's wrapper 96 (checks, kernel pick, splits, workspace), the decode rows' gather
out of the step and scatter back, the prefill rows' SDPA. Every attention layer of one step has the same rows,
shapes and strides; only the addresses differ. An AttentionPlan makes the query buffer, the prologue's launch and
the decode rows' launches (ops.launches, the kernel paged_decode would pick) once; each layer sets its addresses and
launches (_pdl.PreparedLaunch). The decode rows a plan serves are the step's first Nd tokens (the scheduler plans
decode rows first), so their query and output are views of the step's: no gather, no scatter. Reusing the buffers
across layers is safe on one stream: a layer's launches queue after the previous layer's readers.
"""
from kernels import _pdl
from kernels.attention import ops, prologue


def layout(query_gate, key, value, k_pool, eps: float) -> tuple:
    """What a plan depends on besides the step's rows: shapes, strides and dtypes of a layer's projections and
    pools, and the norms' eps."""
    return (tuple(query_gate.shape), query_gate.stride(), query_gate.dtype, tuple(key.shape), key.stride(), key.dtype,
            tuple(value.shape), value.stride(), value.dtype, tuple(k_pool.shape), k_pool.stride(), k_pool.dtype, eps)


class AttentionPlan:
    """GatedAttention.core's prologue and decode-row launches for every attention layer of one step.

    From the step's first attention layer: query_gate [T, nH, 2 HD], key, value [T, nKV HD] bf16 (prologue.serves
    holds), q_norm, k_norm [HD] bf16, eps, cos, sin [T, ROT] bf16, slot_mapping [T] int64, pools (k, v) [blocks, BS,
    nKV, HD] bf16 contiguous; decode None, or (Nd, tables [Nd, B] int64, num_keys [Nd] int32, max_keys, scale) of the
    step's decode rows, its tokens 0 .. Nd - 1 (PagedStepMeta.num_leading_decode). PagedDecodeError as
    ops.paged_decode for decode rows its kernels cannot take."""

    def __init__(self, query_gate, key, value, q_norm, k_norm, eps: float, cos, sin, slot_mapping, pools,
                 decode=None):
        import torch

        k_pool, v_pool = pools
        num_tokens, num_heads, head_dim = query_gate.shape[0], query_gate.shape[1], k_pool.shape[-1]
        self.key = layout(query_gate, key, value, k_pool, eps)
        self.query = torch.empty(num_tokens, num_heads, head_dim, dtype=torch.bfloat16, device=query_gate.device)
        self.keep = (cos.contiguous(), sin.contiguous(), slot_mapping.contiguous())
        grid, block, args = prologue.launch_args(query_gate, key, value, q_norm, k_norm, eps, *self.keep, self.query,
                                                 k_pool, v_pool)
        self.prologue = _pdl.PreparedLaunch(prologue._kernel("attn_qk_norm_rope_cache", head_dim), (grid,), (block,),
                                            args, pdl=_pdl.supported())
        self.num_decode, self.decode, self.ws = 0, [], None
        if decode is not None:
            self._plan_decode(decode, pools)

    def _plan_decode(self, decode: tuple, pools: tuple) -> None:
        num_rows, tables, num_keys, max_keys, scale = decode
        query = self.query[:num_rows]
        ops._check(query, *pools, tables, num_keys)
        kernel = ops.pick_kernel(num_rows, query.shape[2])
        found, self.ws = ops.launches(kernel, query, *pools, tables, num_keys, scale, max_keys, query)
        self.decode = [_pdl.PreparedLaunch(fn, grid, block, args, shared_mem, pdl=False)
                       for fn, grid, block, args, shared_mem in found]
        self.num_decode, self.keep_decode = num_rows, (tables, num_keys)

    def matches(self, query_gate, key, value, k_pool, eps: float) -> bool:
        """This layer's tensors have the plan's layout."""
        return layout(query_gate, key, value, k_pool, eps) == self.key

    def qk_norm_rope_cache(self, query_gate, key, value, q_norm, k_norm, k_pool, v_pool):
        """prologue.qk_norm_rope_cache for this layer (its tensors as the plan's first layer's, the same rows):
        writes the pools, returns the plan's query buffer [T, nH, HD] bf16 (the next layer writes it again)."""
        launch = self.prologue
        for index, t in ((prologue.ARG_QUERY_GATE, query_gate), (prologue.ARG_KEY, key), (prologue.ARG_VALUE, value),
                         (prologue.ARG_Q_NORM, q_norm), (prologue.ARG_K_NORM, k_norm), (prologue.ARG_K_POOL, k_pool),
                         (prologue.ARG_V_POOL, v_pool)):
            launch.set(index, t.data_ptr())
        launch.launch()
        return self.query

    def decode_into(self, k_pool, v_pool, out) -> None:
        """This layer's decode rows: attention of the query buffer's rows 0 .. Nd - 1 over the pools [blocks, BS,
        nKV, HD] into out[:Nd] (out [T, nH, HD] bf16 contiguous), as ops.paged_decode does."""
        main, address = self.decode[0], out.data_ptr()
        main.set(ops.ARG_K_POOL, k_pool.data_ptr())
        main.set(ops.ARG_V_POOL, v_pool.data_ptr())
        main.set(ops.ARG_OUT, address)
        if self.ws is None:
            main.set(ops.ARG_WS, address)
        else:
            self.decode[1].set(ops.COMBINE_ARG_OUT, address)
        for launch in self.decode:
            launch.launch()
