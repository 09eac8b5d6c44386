"""Worker process: the Gated DeltaNet token mixer (linear attention with per-sequence state slots)."""
import torch
import torch.nn.functional as F

from kernels.gdn import naive
from kernels.gdn import ops as gdn_ops
from kernels.gdn.decode_plan import DecodePlan
from kernels.gdn.prefill_plan import PrefillPlan
from worker.layers.fused import fuse
from worker.layers.gdn_meta import GdnStepMeta
from worker.layers.linear import Linear
from worker.layers import norm as norm_layer
from worker.layers.norm import GatedRMSNorm


def split_fused_qkvz(qkvz: torch.Tensor, ba: torch.Tensor, num_k_heads: int, head_k_dim: int,
                     head_v_dim: int, num_v_heads: int) -> dict:
    """Qwen3-Next fused projections -> Qwen3.5 separate ones (model-spec.md 1.4, `fix_query_key_value_ordering`).

    qkvz [2*H*dk + 2*HV*dv, D], rows per key head g: [q_g(dk), k_g(dk), v_g(r*dv), z_g(r*dv)], r = HV/H;
    ba [2*HV, D], rows per key head g: [b_g(r), a_g(r)].
    Returns {"in_proj_qkv": [2*H*dk + HV*dv, D], "in_proj_z": [HV*dv, D], "in_proj_b", "in_proj_a": [HV, D]}.
    """
    r = num_v_heads // num_k_heads
    width = qkvz.shape[-1]
    grouped = qkvz.view(num_k_heads, 2 * head_k_dim + 2 * r * head_v_dim, width)
    q, k, v, z = torch.split(grouped, [head_k_dim, head_k_dim, r * head_v_dim, r * head_v_dim], dim=1)
    b, a = torch.split(ba.view(num_k_heads, 2 * r, width), [r, r], dim=1)
    flat = [x.reshape(-1, width) for x in (q, k, v, z, b, a)]
    return {"in_proj_qkv": torch.cat(flat[:3], dim=0), "in_proj_z": flat[3], "in_proj_b": flat[4],
            "in_proj_a": flat[5]}


def delta_rule_varlen(q, k, v, g, beta, initial_state, cu_seqlens):
    """Runs single-token rows through the recurrence and longer rows through the chunked form.

    Shapes as in `kernels.gdn.naive`: q, k [T, H, K], v [T, HV, V], g, beta [T, HV], initial_state
    [N, HV, K, V] fp32, cu_seqlens [N+1]. Returns o [T, HV, V] (v's dtype), final_state [N, HV, K, V] fp32.
    """
    lens = (cu_seqlens[1:] - cu_seqlens[:-1]).long()
    decode = lens == 1
    if bool(decode.all()):
        return naive.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=initial_state, cu_seqlens=cu_seqlens)
    if not bool(decode.any()):
        return naive.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=initial_state, cu_seqlens=cu_seqlens)
    row_of_token = torch.repeat_interleave(torch.arange(lens.numel(), device=q.device), lens)
    groups = (torch.nonzero(decode[row_of_token]).flatten(), torch.nonzero(~decode[row_of_token]).flatten())
    ops = (naive.recurrent_gated_delta_rule, naive.chunk_gated_delta_rule)
    out = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    final = torch.empty(initial_state.shape, dtype=torch.float32, device=initial_state.device)
    for rows, tokens, op in zip((decode, ~decode), groups, ops):
        sub_cu = F.pad(lens[rows].cumsum(0), (1, 0))
        out[tokens], final[rows] = op(q[tokens], k[tokens], v[tokens], g[tokens], beta[tokens],
                                      initial_state=initial_state[rows], cu_seqlens=sub_cu)
    return out, final


class GatedDeltaNet(torch.nn.Module):
    """transformers `Qwen3_5GatedDeltaNet` (model-spec.md 1.7, 1.8) over a packed batch with state slots.

    in_proj_qkv [conv_dim, D] (rows [q(H*dk); k(H*dk); v(HV*dv)]), in_proj_z [HV*dv, D], in_proj_b/a [HV, D],
    conv_weight [conv_dim, Kc] (depthwise, no bias), dt_bias [HV], A_log [HV], norm weight [dv], out_proj [D, HV*dv].
    Qwen3-Next's fused in_proj_qkvz / in_proj_ba are split into these by `split_fused_qkvz` at load.
    """

    def __init__(self, projections: dict, conv_weight, dt_bias, A_log, norm: GatedRMSNorm, out_proj: Linear,
                 num_k_heads: int, head_k_dim: int, head_v_dim: int):
        super().__init__()
        self.in_proj_qkv, self.in_proj_z = projections["in_proj_qkv"], projections["in_proj_z"]
        self.in_proj_b, self.in_proj_a = projections["in_proj_b"], projections["in_proj_a"]
        self.conv_weight = torch.nn.Parameter(conv_weight, requires_grad=False)
        self.dt_bias = torch.nn.Parameter(dt_bias, requires_grad=False)
        self.A_log = torch.nn.Parameter(A_log, requires_grad=False)
        self.norm, self.out_proj = norm, out_proj
        self.num_k_heads, self.head_k_dim, self.head_v_dim = num_k_heads, head_k_dim, head_v_dim
        self.key_dim = num_k_heads * head_k_dim
        self.in_proj_all = None

    def fuse_projections(self) -> bool:
        """Replaces in_proj_qkv, _z, _b, _a by FusedProjections (one Linear per run of same-kind weights: all four,
        or [qkv; z] and [b; a] where the gates stay bf16); True when that saves a launch."""
        fused = fuse([self.in_proj_qkv, self.in_proj_z, self.in_proj_b, self.in_proj_a])
        if fused is None:
            return False
        self.in_proj_all = fused
        self.in_proj_qkv = self.in_proj_z = self.in_proj_b = self.in_proj_a = None
        return True

    @property
    def input_linear(self):
        """The Linear that reads the layer's input first (project), for RMSNorm.forward_into."""
        return self.in_proj_qkv if self.in_proj_all is None else self.in_proj_all.linears[0]

    def project(self, x, outs=None) -> tuple:
        """x [T, D] -> mixed [T, conv_dim], z [T, HV*dv], b, a [T, HV] (column views where fused). outs: one
        [T, width] buffer per launch (projection_widths) to write into."""
        if self.in_proj_all is None:
            linears = (self.in_proj_qkv, self.in_proj_z, self.in_proj_b, self.in_proj_a)
            return tuple(lin(x) if outs is None else lin(x, out=o) for lin, o in zip(linears, outs or linears))
        return self.in_proj_all(x, outs)

    def projection_widths(self) -> list:
        """Output width of each projection launch of project, in order."""
        if self.in_proj_all is None:
            return [lin.out_features for lin in (self.in_proj_qkv, self.in_proj_z, self.in_proj_b, self.in_proj_a)]
        return self.in_proj_all.widths

    def core_shape(self, num_tokens: int) -> tuple:
        """The shape of core()'s output: [T, HV, dv]."""
        return (num_tokens, self.dt_bias.shape[0], self.head_v_dim)

    def uses_kernels(self, x: torch.Tensor) -> bool:
        """The CUDA kernels serve this input: bf16 on a GPU and 128-wide heads (what the kernels are built for)."""
        return (x.is_cuda and x.dtype == torch.bfloat16 and self.head_k_dim == gdn_ops.HEAD_DIM
                and self.head_v_dim == gdn_ops.HEAD_DIM)

    def forward(self, x, cu_seqlens, state_slots, recurrent_state, conv_state, meta=None) -> torch.Tensor:
        """x [T, D]; cu_seqlens [N+1]; state_slots [N] int64; recurrent_state [S, HV, dk, dv] fp32 (or bf16 on the
        kernel path) and conv_state [S, conv_dim, Kc-1] are this layer's pools, read at and written back to the
        rows' slots. meta: GdnStepMeta, given on the GPU path; with it and uses_kernels(x) the CUDA kernels run,
        else the plain-torch ops (any device). Returns [T, D] in x's dtype. = finish(core(project(x), ...))."""
        proj = self.project(x)
        return self.finish(self.core(proj, cu_seqlens, state_slots, recurrent_state, conv_state, meta), proj)

    def core(self, proj: tuple, cu_seqlens, state_slots, recurrent_state, conv_state, meta=None,
             out=None) -> torch.Tensor:
        """The recurrent part: proj = project(x) -> o [T, HV, dv] in x's dtype (conv, gates and the delta rule;
        reads and writes the rows' conv / recurrent state), arguments as forward. The step's split into rows
        lives here: the piecewise prefill graphs (worker/prefill_graphs.py) run it eagerly between their graphs.
        out: a contiguous [T, HV, dv] tensor the CUDA path writes o into where it can (returned then; else a new
        tensor is, and the caller copies)."""
        mixed, z, b, a = proj
        if meta is not None and self.uses_kernels(mixed):
            return self._core_kernels(proj, meta, recurrent_state, conv_state, out)
        num_tokens = mixed.shape[0]
        mixed, new_conv = naive.causal_conv1d(mixed, self.conv_weight, conv_state[state_slots], cu_seqlens)
        conv_state[state_slots] = new_conv
        q, k, v = torch.split(mixed, [self.key_dim, self.key_dim, mixed.shape[-1] - 2 * self.key_dim], dim=-1)
        q = q.reshape(num_tokens, self.num_k_heads, self.head_k_dim)
        k = k.reshape(num_tokens, self.num_k_heads, self.head_k_dim)
        v = v.reshape(num_tokens, -1, self.head_v_dim)
        beta = b.sigmoid()
        g = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias)
        core, final = delta_rule_varlen(q, k, v, g, beta, recurrent_state[state_slots], cu_seqlens)
        recurrent_state[state_slots] = final.to(recurrent_state.dtype)
        return core.reshape(num_tokens, -1, self.head_v_dim)

    def finish(self, core: torch.Tensor, proj: tuple) -> torch.Tensor:
        """The per-token tail: the gated RMSNorm of core [T, HV, dv] (gate z from proj) and out_proj -> [T, D]."""
        num_tokens, z = core.shape[0], proj[1]
        if num_tokens == 1 and core.is_cuda and norm_layer.USE_KERNELS:  # the gated norm rides in out_proj's GEMV
            fused = self.out_proj.forward_gated_norm(core.reshape(1, -1), z, self.norm.weight, self.norm.eps)
            if fused is not None:
                return fused
        # [T, HV, dv] views: z is a column view of the fused in_proj output, read in place (a [T * HV, dv] reshape
        # of it would be a copy kernel per layer from 2 tokens on)
        heads = (num_tokens, -1, self.head_v_dim)
        core = self.norm(core.reshape(heads), z.reshape(heads)).reshape(num_tokens, -1)
        return self.out_proj(core)

    def _kernel_params(self) -> tuple:
        """conv weight [C, Kc], A_log, dt_bias [HV] as contiguous float32 (made once; before any graph capture)."""
        if getattr(self, "_f32", None) is None or self._f32[0].device != self.conv_weight.device:
            conv = self.conv_weight.detach().reshape(self.conv_weight.shape[0], -1)
            self._f32 = tuple(t.detach().float().contiguous() for t in (conv, self.A_log, self.dt_bias))
        return self._f32

    def _core_kernels(self, proj: tuple, meta: GdnStepMeta, recurrent_state, conv_state, out=None) -> torch.Tensor:
        """The CUDA path of core: decode rows through conv_decode + fused_recurrent_decode, prefill rows through
        conv_prefill + chunk_prefill (kernels/gdn/ops.py; planned once a step, kernels/gdn/prefill_plan.py).
        -> o [T, HV, dv] bf16 (out where given, but on all-decode steps)."""
        conv_w, a_log, dt_bias = self._kernel_params()
        mixed, z, b, a = proj
        num_tokens = mixed.shape[0]
        if mixed.stride(0) % 8:
            # the kernels read 16-byte aligned token rows
            mixed = mixed.contiguous()
        if meta.all_decode:
            return gdn_ops.gdn_decode(mixed, a, b, conv_w, a_log, dt_bias, conv_state, recurrent_state,
                                      meta.decode_slots, self.num_k_heads)
        if meta.all_prefill:
            return self._prefill(mixed, a, b, meta, recurrent_state, conv_state, out)
        core = out if out is not None else torch.empty(num_tokens, recurrent_state.shape[1], self.head_v_dim,
                                                       dtype=mixed.dtype, device=mixed.device)
        lead = meta.num_leading_decode
        if lead and core.is_contiguous():  # rows 0 .. lead - 1 decode, the rest prefill: views (session 28 run 6)
            core[:lead] = self._decode_rows(mixed[:lead], a[:lead], b[:lead], meta, recurrent_state, conv_state)
            self._prefill(mixed[lead:], a[lead:], b[lead:], meta, recurrent_state, conv_state, core[lead:])
            return core
        dec = meta.decode_tokens
        core[dec] = gdn_ops.gdn_decode(mixed[dec], a[dec], b[dec], conv_w, a_log, dt_bias, conv_state,
                                       recurrent_state, meta.decode_slots, self.num_k_heads)
        pre = meta.prefill_tokens
        core[pre] = self._prefill(mixed[pre], a[pre], b[pre], meta, recurrent_state, conv_state)
        return core

    def _decode_rows(self, mixed, a, b, meta: GdnStepMeta, recurrent_state, conv_state) -> torch.Tensor:
        """A split step's decode rows mixed [Nd, C], a, b [Nd, HV] -> o [Nd, HV, dv] bf16: planned once a step by
        its first GDN layer (meta.decode_plan, kernels/gdn/decode_plan.py), ops.gdn_decode where a layer does not
        fit that plan."""
        conv_w, a_log, dt_bias = self._kernel_params()
        tensors = (mixed, a, b, conv_w, a_log)
        plan = meta.decode_plan
        if plan is None and mixed.is_cuda:  # (CPU: the plumbing tests' stand-ins for gdn_decode, as in _prefill)
            plan = meta.decode_plan = DecodePlan(*tensors, dt_bias, conv_state, recurrent_state, meta.decode_slots,
                                                 self.num_k_heads, gdn_ops.HEAD_DIM ** -0.5)
        if plan is not None and plan.matches(*tensors, conv_state, recurrent_state):
            return plan.run(*tensors, dt_bias, conv_state, recurrent_state)
        return gdn_ops.gdn_decode(mixed, a, b, conv_w, a_log, dt_bias, conv_state, recurrent_state, meta.decode_slots,
                                  self.num_k_heads)

    def _prefill(self, mixed, a, b, meta: GdnStepMeta, recurrent_state, conv_state, out=None) -> torch.Tensor:
        """mixed [Tp, C], a, b [Tp, HV] of the prefill rows -> o [Tp, HV, V] bf16 (out where given). The step's
        first GDN layer plans the launches (checks, kernels, workspace) for the rest (meta.prefill_plan); a layer
        whose tensors do not fit that plan runs the unplanned gdn_prefill."""
        conv_w, a_log, dt_bias = self._kernel_params()
        tensors = (mixed, a, b, conv_w, a_log)
        plan = meta.prefill_plan
        if plan is None and mixed.is_cuda:  # (CPU: the plumbing tests' stand-ins for gdn_prefill)
            plan = meta.prefill_plan = PrefillPlan(*tensors, dt_bias, conv_state, recurrent_state, meta.prefill_slots,
                                                   meta.prefill_cu, meta.prefill_init, meta.tables, self.num_k_heads,
                                                   gdn_ops.HEAD_DIM ** -0.5)
        if plan is not None and plan.matches(*tensors, conv_state, recurrent_state):
            return plan.run(*tensors, dt_bias, conv_state, recurrent_state, out)
        o = gdn_ops.gdn_prefill(mixed, a, b, conv_w, a_log, dt_bias, conv_state, recurrent_state, meta.prefill_slots,
                                meta.prefill_cu, self.num_k_heads, has_initial_state=meta.prefill_init,
                                tables=meta.tables)
        return o if out is None else out.copy_(o)
