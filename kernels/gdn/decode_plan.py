"""Worker process (GPU path): the GDN decode core (ops.gdn_decode: conv_decode, then the recurrent decode kernel) of a
split mixed step's decode rows, planned once per step and reused by every GDN layer.

A mixed step with more decode rows than worker/layers/gdn_meta.py chunks runs them through the decode kernels, eagerly
between the piecewise prefill graphs' replays. ops.gdn_decode checks its tensors, picks the variant, allocates y and
o and builds ~25 kernel arguments on every call: with the rest of the split, ~470 us of host time a GDN layer on the
H200 machine's CPU (session 28 device run 7: 40 decode rows + a 64-token chunk, 535 us a layer against 63 for an
unsplit step). Every GDN layer of the step has the same rows, shapes and strides; only the addresses differ. A
DecodePlan does the checks, the variant pick, y [N, C] bf16 and o [N, HV, V] bf16 once; each layer's `run` sets its
seven addresses in the two prepared launches (_pdl.PreparedLaunch; kernels and argument order as
_launch.conv_decode_launch and _decode.recurrent_launch) and launches. The buffers are reused across layers: a
layer's readers of o are queued before the next layer writes it.
"""
from kernels import _pdl
from kernels.gdn import _decode, _launch
from kernels.gdn._launch import HEAD_DIM, _need
from kernels.gdn.prefill_plan import layout


class DecodePlan:
    """ops.gdn_decode for every GDN layer of one step. From the step's first GDN layer: mixed [N, C] bf16 (a row
    view), a, b [N, HV] bf16, conv_w float32 [C, Kc] contiguous, A_log / dt_bias float32 [HV], conv_pool [S, C, 3],
    state_pool [S, HV, K, V], slot_ids [N] int32 on the device, num_k_heads, scale (the q scale). GdnKernelError as
    ops.gdn_decode for tensors the kernels cannot take."""

    def __init__(self, mixed, a, b, conv_w, A_log, dt_bias, conv_pool, state_pool, slot_ids, num_k_heads: int,
                 scale: float):
        import torch

        num_seqs, channels = mixed.shape
        num_v_heads = state_pool.shape[1]
        self.key = layout(mixed, a, b, conv_w, A_log, conv_pool, state_pool)
        _launch._check_rows(mixed, "x", channels)
        _need(channels % 8 == 0 and num_seqs > 0, "conv channels must be a multiple of 8, rows at least one")
        _launch._check_gates(a, b, A_log, dt_bias, num_v_heads)
        _launch._check_pool(state_pool, num_v_heads)
        self.slots = slot_ids.contiguous()
        _need(self.slots.dtype == torch.int32 and self.slots.numel() == num_seqs, "slot_ids must be int32 [N]")
        self.y = torch.empty(num_seqs, channels, dtype=torch.bfloat16, device=mixed.device)
        self.o = torch.empty(num_seqs, num_v_heads, HEAD_DIM, dtype=torch.bfloat16, device=mixed.device)
        conv = _launch.conv_decode_launch(mixed, conv_w, conv_pool, self.slots, self.y,
                                          _launch._conv_define(conv_pool, channels))
        key_dim = num_k_heads * HEAD_DIM
        q = self.y[:, :key_dim].unflatten(1, (num_k_heads, HEAD_DIM))
        k = self.y[:, key_dim:2 * key_dim].unflatten(1, (num_k_heads, HEAD_DIM))
        v = self.y[:, 2 * key_dim:].unflatten(1, (num_v_heads, HEAD_DIM))
        fn, grid, block, args, smem, pdl = _decode.recurrent_launch(q, k, v, a, b, A_log, dt_bias, state_pool,
                                                                    self.slots, scale, self.o, "OUT_F32=0")
        self.conv = _pdl.PreparedLaunch(*conv, pdl=False)
        self.recurrent = _pdl.PreparedLaunch(fn, grid, block, args, smem, pdl=pdl)

    def matches(self, mixed, a, b, conv_w, A_log, conv_pool, state_pool) -> bool:
        """This layer's tensors have the plan's layout (and mixed its 16-byte alignment)."""
        return mixed.data_ptr() % 16 == 0 and layout(mixed, a, b, conv_w, A_log, conv_pool, state_pool) == self.key

    def run(self, mixed, a, b, conv_w, A_log, dt_bias, conv_pool, state_pool):
        """One layer's decode core: -> the plan's o [N, HV, V] bf16 (the next layer writes it again)."""
        conv, rec = self.conv, self.recurrent
        for launch, index, t in ((conv, _launch.CONV_DECODE_X, mixed), (conv, _launch.CONV_DECODE_WEIGHT, conv_w),
                                 (conv, _launch.CONV_DECODE_POOL, conv_pool), (rec, _decode.RECURRENT_A, a),
                                 (rec, _decode.RECURRENT_B, b), (rec, _decode.RECURRENT_A_LOG, A_log),
                                 (rec, _decode.RECURRENT_DT_BIAS, dt_bias), (rec, _decode.RECURRENT_POOL, state_pool)):
            launch.set(index, t.data_ptr())
        conv.launch()
        rec.launch()
        return self.o
