"""Worker process: the Gated DeltaNet token mixer (linear attention with per-sequence state slots)."""
import torch
import torch.nn.functional as F

from kernels.gdn import naive
from worker.layers.linear import Linear
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
    final = torch.empty_like(initial_state)
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

    def forward(self, x, cu_seqlens, state_slots, recurrent_state, conv_state) -> torch.Tensor:
        """x [T, D]; cu_seqlens [N+1]; state_slots [N] int64; recurrent_state [S, HV, dk, dv] fp32 and
        conv_state [S, conv_dim, Kc-1] are this layer's pools, read at and written back to the rows' slots.
        Returns [T, D] in x's dtype."""
        num_tokens = x.shape[0]
        mixed, new_conv = naive.causal_conv1d(self.in_proj_qkv(x), self.conv_weight, conv_state[state_slots],
                                              cu_seqlens)
        conv_state[state_slots] = new_conv
        q, k, v = torch.split(mixed, [self.key_dim, self.key_dim, mixed.shape[-1] - 2 * self.key_dim], dim=-1)
        q = q.reshape(num_tokens, self.num_k_heads, self.head_k_dim)
        k = k.reshape(num_tokens, self.num_k_heads, self.head_k_dim)
        v = v.reshape(num_tokens, -1, self.head_v_dim)
        beta = self.in_proj_b(x).sigmoid()
        g = -self.A_log.float().exp() * F.softplus(self.in_proj_a(x).float() + self.dt_bias)
        core, final = delta_rule_varlen(q, k, v, g, beta, recurrent_state[state_slots], cu_seqlens)
        recurrent_state[state_slots] = final.to(recurrent_state.dtype)
        z = self.in_proj_z(x).reshape(-1, self.head_v_dim)
        core = self.norm(core.reshape(-1, self.head_v_dim), z).reshape(num_tokens, -1)
        return self.out_proj(core)
