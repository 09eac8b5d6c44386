"""Worker process (GPU path): the GDN prefill core's three launches planned once per step, reused by every layer.

ops.gdn_prefill checks its tensors, builds kernel defines, looks the kernels up and allocates its workspace on every
call: about 250 us of host time a GDN layer on the H200 machine's CPU for ~55 us of launches, 12 of a 128-token
step's 22 ms of host time (64 layers, 48 of them GDN; the piecewise prefill graphs of worker/prefill_graphs.py run
the cores eagerly between their replays, so a short prompt's step is host-bound: session 27, device run 3). Every
GDN layer of one step has the same row split, shapes, strides and pool layout; only the addresses differ. A
PrefillPlan does the checks, the lookups, the grids and the workspace (conv output y [T, C] bf16, fp16 qn / kn
[T, H, K], f32 gc / beta [T, HV], fp16 T / P [NC, HV, 64, 64]) once, then each layer's `run` only sets its addresses
in the launches prepared by the first (kernels as _launch.conv_prefill / chunk_prep / chunk_state, arguments from
the same _launch.conv_prefill_args / chunk_prep_args / chunk_state_args, workspace from _launch.workspace).
Reusing the workspace across layers is safe on one stream: a layer's kernels are queued after the previous layer's.
The output o is new each call (its reader runs after the next layer's kernels are queued) unless `out` is given.
"""
from kernels import _pdl
from kernels.gdn import _build, _launch
from kernels.gdn._launch import (CONV_MIXED, CONV_POOL, CONV_WEIGHT, HEAD_DIM, PREP_A, PREP_A_LOG, PREP_B,
                                PREP_DT_BIAS, PREP_SMEM, STATE_OUT, STATE_POOL, STATE_SMEM, _need)


def layout(mixed, a, b, conv_w, A_log, conv_pool, state_pool) -> tuple:
    """What a plan depends on besides the row split: shapes, strides and dtypes of one layer's inputs and pools."""
    return (tuple(mixed.shape), mixed.stride(), mixed.dtype, a.stride(), b.stride(), tuple(a.shape), tuple(b.shape),
            a.dtype, b.dtype, tuple(conv_w.shape), conv_w.dtype, conv_w.stride(), A_log.shape, A_log.dtype,
            tuple(conv_pool.shape), conv_pool.stride(), conv_pool.dtype, conv_pool.data_ptr() % 16,
            tuple(state_pool.shape), state_pool.stride(), state_pool.dtype)


class PrefillPlan:
    """ops.gdn_prefill for every GDN layer of one step. Arguments as ops.gdn_prefill, from the step's first GDN
    layer: mixed [T, C] bf16, a, b [T, HV] bf16, conv_w float32 [C, Kc] contiguous, A_log / dt_bias float32 [HV],
    pools, slot_ids / cu_seqlens / has_init int32 on the device, tables (ops.prefill_tables). GdnKernelError as
    ops.gdn_prefill for tensors the kernels cannot take."""

    def __init__(self, mixed, a, b, conv_w, A_log, dt_bias, conv_pool, state_pool, slot_ids, cu_seqlens, has_init,
                 tables, num_k_heads: int, scale: float):
        import torch

        num_tokens, channels = mixed.shape
        num_v_heads = state_pool.shape[1]
        self.key = layout(mixed, a, b, conv_w, A_log, conv_pool, state_pool)
        self._check(mixed, a, b, conv_w, A_log, dt_bias, conv_pool, state_pool, num_k_heads)
        chunks, seq_chunks, num_chunks = tables
        dev = mixed.device
        self.y = torch.empty(num_tokens, channels, dtype=torch.bfloat16, device=dev)
        self.ws = _launch.workspace(num_tokens, num_k_heads, num_v_heads, num_chunks, dev)
        self.shape = (num_tokens, num_v_heads, HEAD_DIM)
        self.num_chunks, self.channels, self.heads = num_chunks, channels, (num_k_heads, num_v_heads)
        self.scale, self.rows = scale, (slot_ids, chunks, seq_chunks, cu_seqlens, has_init)
        self._kernels(conv_pool, state_pool, seq_chunks.numel() - 1)
        self.prepared = {}  # out define -> [conv, prep, state] _pdl.PreparedLaunch

    @staticmethod
    def _check(mixed, a, b, conv_w, A_log, dt_bias, conv_pool, state_pool, num_k_heads: int) -> None:
        """The checks of _launch.conv_prefill and chunk_setup, on the first layer's tensors."""
        import torch

        channels, num_v_heads = mixed.shape[1], state_pool.shape[1]
        _launch._check_rows(mixed, "x", channels)
        _need(channels % 8 == 0, "conv channels must be a multiple of 8")
        _need(channels == (2 * num_k_heads + num_v_heads) * HEAD_DIM, "conv channels must be (2 H + HV) * 128")
        _need(num_v_heads % num_k_heads == 0 and num_v_heads // num_k_heads <= _launch.GROUP_MAX,
              "HV / H must be 1..8")
        _need(tuple(conv_w.shape) == (channels, _launch.CONV_WIDTH) and conv_w.is_contiguous()
              and conv_w.dtype == torch.float32, "conv weight must be contiguous float32 [C, 4]")
        _launch._check_gates(a, b, A_log, dt_bias, num_v_heads)
        _launch._check_pool(state_pool, num_v_heads)
        _launch._conv_define(conv_pool, channels)

    def _kernels(self, conv_pool, state_pool, num_seqs: int) -> None:
        num_k_heads, num_v_heads = self.heads
        self.conv = _build.kernel("conv.cu", "gdn_conv_prefill", _launch._conv_define(conv_pool, self.channels))
        self.conv_grid = ((self.channels // 8 + 127) // 128, self.num_chunks, _launch.conv_pieces(self.num_chunks))
        self.prep = _build.kernel("chunk.cu", "gdn_chunk_prep", (), PREP_SMEM)
        splits = _launch.prep_splits(self.num_chunks * num_k_heads, num_v_heads // num_k_heads)
        self.prep_grid = (self.num_chunks, num_k_heads, splits)
        self.state_defines = _launch._state_define(state_pool)
        self.state_grid = (HEAD_DIM // 64, num_v_heads, num_seqs)

    def matches(self, mixed, a, b, conv_w, A_log, conv_pool, state_pool) -> bool:
        """This layer's tensors have the plan's layout (and mixed its 16-byte alignment)."""
        return mixed.data_ptr() % 16 == 0 and layout(mixed, a, b, conv_w, A_log, conv_pool, state_pool) == self.key

    def run(self, mixed, a, b, conv_w, A_log, dt_bias, conv_pool, state_pool, out=None):
        """One layer's core: -> o [T, HV, V] (out when given: contiguous bf16 or float32 of that shape). The three
        launches are prepared once per output dtype (_pdl.PreparedLaunch); a layer sets its addresses and launches:
        ~104-143 us of host time a layer when each launch built its arguments (session 27, run 4)."""
        o, out_define = _launch._output(out, self.shape, mixed.device)
        if self.num_chunks == 0:
            return o
        prepared = self.prepared.get(out_define)
        if prepared is None:
            found = self._launches(mixed, a, b, conv_w, A_log, dt_bias, conv_pool, state_pool, o, out_define)
            prepared = self.prepared[out_define] = [_pdl.PreparedLaunch(fn, grid, block, args, smem, pdl=False)
                                                    for fn, grid, block, args, smem in found]
        conv, prep, state = prepared
        for launch, index, t in ((conv, CONV_MIXED, mixed), (conv, CONV_WEIGHT, conv_w), (conv, CONV_POOL, conv_pool),
                                 (prep, PREP_A, a), (prep, PREP_B, b), (prep, PREP_A_LOG, A_log),
                                 (prep, PREP_DT_BIAS, dt_bias), (state, STATE_POOL, state_pool), (state, STATE_OUT, o)):
            launch.set(index, t.data_ptr())
        for launch in prepared:
            launch.launch()
        return o

    def _launches(self, mixed, a, b, conv_w, A_log, dt_bias, conv_pool, state_pool, o, out_define) -> list:
        """A layer's three launches, (kernel, grid, block, args, shared_mem) each: conv, prep, state, their
        arguments from _launch.conv_prefill_args / chunk_prep_args / chunk_state_args (the eager path's)."""
        slot_ids, chunks, seq_chunks, cu_seqlens, has_init = self.rows
        y, (num_k_heads, num_v_heads), ws = self.y, self.heads, dict(self.ws, o=o)
        q, k, v = (y[:, lo * HEAD_DIM:hi * HEAD_DIM] for lo, hi in ((0, num_k_heads), (num_k_heads, 2 * num_k_heads),
                                                                    (2 * num_k_heads, 2 * num_k_heads + num_v_heads)))
        conv_args = _launch.conv_prefill_args(mixed, conv_w, conv_pool, slot_ids, chunks, cu_seqlens, has_init, y)
        prep_args = _launch.chunk_prep_args(ws, q, k, a, b, A_log, dt_bias, self.scale, chunks)
        state = _build.kernel("chunk_state.cu", "gdn_chunk_state", self.state_defines + (out_define,), STATE_SMEM)
        state_args = _launch.chunk_state_args(ws, v, state_pool, slot_ids, has_init, chunks, seq_chunks)
        return [(self.conv, self.conv_grid, (128,), conv_args, 0),
                (self.prep, self.prep_grid, (128,), prep_args, PREP_SMEM),
                (state, self.state_grid, (256,), state_args, STATE_SMEM)]
