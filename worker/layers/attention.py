"""Worker process: gated full attention (GQA, q/k norm, partial RoPE, sigmoid output gate) over a paged KV cache."""
from dataclasses import dataclass

import os

import torch
import torch.nn.functional as F

from kernels.attention import ops as attention_ops
from kernels.attention import prologue
from kernels.attention.step_plan import AttentionPlan
from worker.batch import ForwardBatch
from worker.layers.fused import fuse
from worker.layers.linear import Linear
from worker.layers.norm import RMSNorm
from worker.layers.paged_attention import PagedStepMeta, decode_attention
from worker.layers.rope import RotaryEmbedding

# decode rows through the paged decode kernels (kernels/attention, CUDA bf16): "auto" where they are the faster path
# (attention_ops.preferred: the tensor-core kernel for every decode row; with SPARKINFER_DECODE_MMA=0 from 8 decode
# rows, or fewer up to 1024 keys), "1" wherever they can serve, "0" never
# (the torch gather + batched matmuls); SPARKINFER_PAGED_DECODE sets it, for A/B runs
DECODE_KERNEL = os.environ.get("SPARKINFER_PAGED_DECODE", "auto")
PLANNED = True  # prefill / mixed steps plan their attention launches once (kernels/attention/step_plan.py); A/B runs


@dataclass
class PagedAttentionMetadata:
    """Per-step KV addressing, built once and shared by every attention layer.

    slot_mapping [T] int64   flat pool index (block * block_size + offset) where each new token's K/V goes
    rows          list of (lo, hi, key_index [n_kv] int64, mask [hi-lo, n_kv] bool): the row's tokens
                  lo:hi of T, the flat pool index of its context_len + (hi-lo) keys, and the causal mask.
    """

    slot_mapping: torch.Tensor
    rows: list

    @staticmethod
    def from_batch(batch: ForwardBatch, block_size: int) -> "PagedAttentionMetadata":
        """The step's KV addressing from the batch's block_tables [N, max_blocks], positions [T], cu_seqlens [N+1] and
        context_lens [N] with block_size tokens a block: slot_mapping [T] and each row's key index and causal mask."""
        device = batch.input_ids.device
        tables = batch.block_tables.long()
        row_of_token = torch.repeat_interleave(torch.arange(batch.num_rows, device=device), batch.seq_lens().long())
        positions = batch.positions.long()
        slot_mapping = tables[row_of_token, positions // block_size] * block_size + positions % block_size
        bounds = batch.cu_seqlens.tolist()
        rows = []
        for r, context_len in enumerate(batch.context_lens.tolist()):
            lo, hi = bounds[r], bounds[r + 1]
            key_pos = torch.arange(context_len + hi - lo, device=device)
            key_index = tables[r, key_pos // block_size] * block_size + key_pos % block_size
            query_pos = positions[lo:hi]
            rows.append((lo, hi, key_index, key_pos[None, :] <= query_pos[:, None]))
        return PagedAttentionMetadata(slot_mapping=slot_mapping, rows=rows)


class GatedAttention(torch.nn.Module):
    """transformers `Qwen3_5Attention` (model-spec.md 1.6) for a packed batch.

    q_proj [nH*2*hd, D] rows per head [query_h(hd), gate_h(hd)]; k_proj, v_proj [nKV*hd, D]; o_proj [D, nH*hd];
    q_norm, k_norm zero-centred RMSNorm over hd. Query head h reads kv head h // (nH / nKV).
    """

    def __init__(self, q_proj: Linear, k_proj: Linear, v_proj: Linear, o_proj: Linear,
                 q_norm: RMSNorm, k_norm: RMSNorm, num_heads: int, num_kv_heads: int, head_dim: int):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = q_proj, k_proj, v_proj, o_proj
        self.q_norm, self.k_norm = q_norm, k_norm
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.scale = head_dim ** -0.5
        self.qkv_proj = None

    def fuse_projections(self) -> bool:
        """Replaces q_proj, k_proj, v_proj by FusedProjections (one Linear per run of same-kind weights); True when
        that saves a launch."""
        fused = fuse([self.q_proj, self.k_proj, self.v_proj])
        if fused is None:
            return False
        self.qkv_proj = fused
        self.q_proj = self.k_proj = self.v_proj = None
        return True

    @property
    def input_linear(self):
        """The Linear that reads the layer's input first (project), for RMSNorm.forward_into."""
        return self.q_proj if self.qkv_proj is None else self.qkv_proj.linears[0]

    def project(self, x, outs=None) -> tuple:
        """x [T, D] -> query_gate [T, nH*2*hd], key, value [T, nKV*hd] (column views where fused). outs: one
        [T, width] buffer per launch (projection_widths) to write into."""
        if self.qkv_proj is None:
            linears = (self.q_proj, self.k_proj, self.v_proj)
            return tuple(lin(x) if outs is None else lin(x, out=o) for lin, o in zip(linears, outs or linears))
        return self.qkv_proj(x, outs)

    def projection_widths(self) -> list:
        """Output width of each projection launch of project, in order."""
        if self.qkv_proj is None:
            return [lin.out_features for lin in (self.q_proj, self.k_proj, self.v_proj)]
        return self.qkv_proj.widths

    def core_shape(self, num_tokens: int) -> tuple:
        """The shape of core()'s output: [T, nH, hd]."""
        return (num_tokens, self.num_heads, self.head_dim)

    def forward(self, x, cos, sin, meta, k_pool, v_pool) -> torch.Tensor:
        """x [T, D]; cos, sin [T, rotary_dim]; meta: PagedAttentionMetadata (per-row path, the CPU reference) or
        PagedStepMeta (vectorized decode rows, GPU path); k_pool, v_pool [num_blocks, block_size, nKV, hd]
        (written in place with this step's K after k_norm + RoPE, and V). Returns [T, D] in x's dtype."""
        proj = self.project(x)
        return self.finish(self.core(proj, cos, sin, meta, k_pool, v_pool), proj)

    def core(self, proj: tuple, cos, sin, meta, k_pool, v_pool, out=None) -> torch.Tensor:
        """proj = project(x) -> the attention output [T, nH, hd] before the output gate: q/k norms, RoPE, this
        step's K/V written to the pools, attention over each row's keys. The step's shape of rows lives here: the
        piecewise prefill graphs run it eagerly between their graphs. out: a [T, nH, hd] tensor in the query's
        dtype to write into where the step has prefill rows (returned then; else a new tensor is)."""
        query_gate, key, value = proj
        num_tokens, hd = query_gate.shape[0], self.head_dim
        query_gate = query_gate.view(num_tokens, self.num_heads, 2 * hd)
        flat_k, flat_v = k_pool.view(-1, self.num_kv_heads, hd), v_pool.view(-1, self.num_kv_heads, hd)
        fused = (prologue.serves(query_gate, key, value, k_pool, cos.shape[-1]) and v_pool.is_contiguous()
                 and self.q_norm.eps == self.k_norm.eps)
        plan = self._plan(meta, query_gate, key, value, cos, sin, (k_pool, v_pool)) if fused else None
        if plan is not None:
            query = plan.qk_norm_rope_cache(query_gate, key, value, self.q_norm.weight, self.k_norm.weight, k_pool,
                                            v_pool)
        elif fused:  # one launch for the norms, RoPE and the cache writes (kernels/attention/prologue.cu)
            query = prologue.qk_norm_rope_cache(query_gate, key, value, self.q_norm.weight, self.k_norm.weight,
                                                self.q_norm.eps, cos, sin, meta.slot_mapping, flat_k, flat_v)
        else:
            query = self._prologue(query_gate, key, value, cos, sin, meta.slot_mapping, flat_k, flat_v)
        if isinstance(meta, PagedStepMeta):
            return self._attend_step(query, (k_pool, v_pool), (flat_k, flat_v), meta, out, plan)
        if out is None:
            out = torch.empty(num_tokens, self.num_heads, hd, dtype=query.dtype, device=query.device)
        self._attend_rows(out, query, flat_k, flat_v, meta.rows)
        return out

    def _plan(self, meta, query_gate, key, value, cos, sin, pools):
        """The step's AttentionPlan (made by its first attention layer, kept in meta.attn_plan) for a prefill or
        mixed step on the fused prologue's path; None for the CPU path, an all-decode step (the decode graphs capture
        those) or with PLANNED off. The plan serves the decode rows too where they lead the step and _decode would
        pick the paged decode kernels."""
        if not PLANNED or not isinstance(meta, PagedStepMeta) or meta.all_decode:
            return None
        eps, plan = self.q_norm.eps, meta.attn_plan
        if plan is not None and plan.matches(query_gate, key, value, pools[0], eps):
            return plan
        decode, num_rows = None, meta.num_leading_decode
        rows_query = query_gate[:num_rows, :, :self.head_dim]
        if num_rows and self._decode_kernel(rows_query, pools[0], meta.max_keys):
            decode = (num_rows, meta.decode_tables, meta.num_keys, meta.max_keys, self.scale)
        meta.attn_plan = AttentionPlan(query_gate, key, value, self.q_norm.weight, self.k_norm.weight, eps, cos, sin,
                                       meta.slot_mapping, pools, decode)
        return meta.attn_plan

    def finish(self, out: torch.Tensor, proj: tuple) -> torch.Tensor:
        """out [T, nH, hd] (core) -> o_proj(out * sigmoid(gate)) [T, D], the gate from proj's query_gate: one
        launch (prologue.gate_mul) for bf16 on CUDA, else torch."""
        num_tokens, hd = out.shape[0], self.head_dim
        query_gate = proj[0].view(num_tokens, self.num_heads, 2 * hd)
        if prologue.gate_serves(out, query_gate):
            return self.o_proj(prologue.gate_mul(out, query_gate))
        gate = query_gate[..., hd:].reshape(num_tokens, -1)
        return self.o_proj(out.reshape(num_tokens, -1) * torch.sigmoid(gate))

    def _prologue(self, query_gate, key, value, cos, sin, slot_mapping, flat_k, flat_v) -> torch.Tensor:
        """The torch reference of prologue.qk_norm_rope_cache: q_norm / k_norm, partial RoPE, this step's K and V
        written into the flat pools [pool slots, nKV, hd] at slot_mapping [T]. Returns the query [T, nH, hd]."""
        num_tokens, hd = query_gate.shape[0], self.head_dim
        query = RotaryEmbedding.apply(self.q_norm(query_gate[..., :hd]), cos, sin)
        key = RotaryEmbedding.apply(self.k_norm(key.view(num_tokens, self.num_kv_heads, hd)), cos, sin)
        flat_k[slot_mapping] = key.to(flat_k.dtype)
        flat_v[slot_mapping] = value.view(num_tokens, self.num_kv_heads, hd).to(flat_v.dtype)
        return query

    def _attend_rows(self, out, query, flat_k, flat_v, rows) -> None:
        """out, query [T, nH, hd]; rows: (lo, hi, key_index, mask) tuples; writes out[lo:hi] row by row."""
        for lo, hi, key_index, mask in rows:
            out[lo:hi] = self._attend(query[lo:hi], flat_k[key_index].to(query.dtype),
                                      flat_v[key_index].to(query.dtype), mask)

    def _attend_step(self, query, pools, flat, meta: PagedStepMeta, out=None, plan=None) -> torch.Tensor:
        """query [T, nH, hd] -> [T, nH, hd] (out where given, but on all-decode steps): decode rows in one
        vectorized call (the plan's launches where it serves them: rows 0 .. Nd - 1 in place), prefill rows per row.
        pools: (k, v) [num_blocks, block_size, nKV, hd]; flat: the same viewed [num_blocks * block_size, nKV, hd]."""
        if meta.all_decode:
            return self._decode(query, pools, flat, meta)
        if out is None:
            out = torch.empty_like(query)
        if plan is not None and plan.num_decode and out.is_contiguous():
            plan.decode_into(*pools, out)
        elif meta.decode_tokens.numel():
            out[meta.decode_tokens] = self._decode(query[meta.decode_tokens], pools, flat, meta)
        self._attend_rows(out, query, *flat, meta.prefill_rows)
        return out

    def _decode_kernel(self, query, k_pool, max_keys: int) -> bool:
        """Decode rows of query [Nd, nH, hd] go to the paged decode kernels: DECODE_KERNEL asks for them (auto:
        attention_ops.preferred) and they take these tensors."""
        auto = attention_ops.preferred(query.shape[0], self.head_dim, max_keys)
        wanted = DECODE_KERNEL == "1" or (DECODE_KERNEL == "auto" and auto)
        return wanted and attention_ops.supports(query, k_pool)

    def _decode(self, query, pools, flat, meta: PagedStepMeta) -> torch.Tensor:
        """query [Nd, nH, hd] of the decode rows -> [Nd, nH, hd]: the paged decode kernel on CUDA bf16 where
        _decode_kernel says (one launch, kernels/attention), else the vectorized torch path (gather + two batched
        matmuls)."""
        if meta.decode_tables is not None and self._decode_kernel(query, pools[0], meta.max_keys):
            return attention_ops.paged_decode(query.contiguous(), *pools, meta.decode_tables, meta.num_keys,
                                              self.scale, meta.max_keys)
        return decode_attention(query, *flat, meta.key_index, meta.key_valid, self.scale)

    def _attend(self, q, k, v, mask):
        """q [L, nH, hd], k, v [n_kv, nKV, hd], mask [L, n_kv] bool (True = visible) -> [L, nH, hd].
        torch SDPA with GQA, as transformers' default `sdpa_attention_forward`; a fresh row (n_kv == L) uses
        the plain causal path so its rounding equals transformers' prefill."""
        fresh = k.shape[0] == q.shape[0]
        # 4-D [1, heads, len, hd] like transformers: SDPA's CPU kernels round differently for 3-D inputs
        q4, k4, v4 = (t.transpose(0, 1)[None] for t in (q, k, v))
        out = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=None if fresh else mask,
                                             is_causal=fresh and q.shape[0] > 1, scale=self.scale, enable_gqa=True)
        return out[0].transpose(0, 1)
