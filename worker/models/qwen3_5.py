"""Worker process: the Qwen3.5 / Qwen3-Next hybrid (GDN + gated attention, dense or MoE MLP) over a packed batch."""
from dataclasses import dataclass

import torch

from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.config import ModelConfig
from worker.layers.attention import GatedAttention, PagedAttentionMetadata
from worker.layers.gdn import GatedDeltaNet
from worker.layers.gdn_meta import GdnStepMeta
from worker.layers.linear import Linear
from worker.layers.mlp import MLP
from worker.layers.moe import SparseMoeBlock
from worker.layers.norm import GatedRMSNorm, RMSNorm
from worker.layers.paged_attention import PagedStepMeta
from worker.layers.rope import RotaryEmbedding


def _linear(tensors, name) -> Linear:
    return Linear(tensors[name + ".weight"])


def _build_gdn(config: ModelConfig, tensors, prefix: str) -> GatedDeltaNet:
    projections = {p: _linear(tensors, prefix + p) for p in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")}
    conv_weight = tensors[prefix + "conv1d.weight"].squeeze(1)
    norm = GatedRMSNorm(tensors[prefix + "norm.weight"], config.rms_norm_eps)
    return GatedDeltaNet(projections, conv_weight, tensors[prefix + "dt_bias"], tensors[prefix + "A_log"], norm,
                         _linear(tensors, prefix + "out_proj"), config.linear_num_key_heads,
                         config.linear_key_head_dim, config.linear_value_head_dim)


def _build_attention(config: ModelConfig, tensors, prefix: str) -> GatedAttention:
    eps = config.rms_norm_eps
    return GatedAttention(
        *(_linear(tensors, prefix + p) for p in ("q_proj", "k_proj", "v_proj", "o_proj")),
        RMSNorm(tensors[prefix + "q_norm.weight"], eps), RMSNorm(tensors[prefix + "k_norm.weight"], eps),
        config.num_attention_heads, config.num_key_value_heads, config.head_dim)


def _build_mlp(tensors, prefix: str) -> MLP:
    return MLP(*(_linear(tensors, f"{prefix}{p}") for p in ("gate_proj", "up_proj", "down_proj")))


def _build_moe(config: ModelConfig, tensors, prefix: str) -> SparseMoeBlock:
    """The sparse MoE block of `worker.models.qwen3_5_weights.moe_shapes`; qwen3_5_moe always renormalises."""
    renormalise = config.norm_topk_prob or config.model_type != "qwen3_next"
    return SparseMoeBlock(tensors[prefix + "gate.weight"], tensors[prefix + "experts.gate_up_proj"],
                          tensors[prefix + "experts.down_proj"], _build_mlp(tensors, prefix + "shared_expert."),
                          _linear(tensors, prefix + "shared_expert_gate"), config.num_experts_per_tok, renormalise)


def _input_linear(module):
    """The Linear that reads `module`'s input first (its input_linear), or None (e.g. the MoE block)."""
    return getattr(module, "input_linear", None)


class DecoderLayer(torch.nn.Module):
    """h = x + mixer(input_layernorm(x)); y = h + mlp(post_attention_layernorm(h)) (model-spec.md 1.3)."""

    def __init__(self, config: ModelConfig, tensors, index: int):
        super().__init__()
        prefix, eps = f"layers.{index}.", config.rms_norm_eps
        self.is_attention = config.layer_types[index] == "full_attention"
        if self.is_attention:
            self.mixer = _build_attention(config, tensors, prefix + "self_attn.")
        else:
            self.mixer = _build_gdn(config, tensors, prefix + "linear_attn.")
        if config.is_moe_layer(index):
            self.mlp = _build_moe(config, tensors, prefix + "mlp.")
        else:
            self.mlp = _build_mlp(tensors, prefix + "mlp.")
        self.input_layernorm = RMSNorm(tensors[prefix + "input_layernorm.weight"], eps)
        self.post_attention_layernorm = RMSNorm(tensors[prefix + "post_attention_layernorm.weight"], eps)

    def forward(self, x: torch.Tensor, mixer_args: tuple, residual: torch.Tensor = None) -> tuple:
        """x [T, D]: this layer's input (residual None), or the previous layer's MLP output to be added to
        `residual` first. Returns (mlp output, h) with the layer's output = mlp output + h, left for the next norm:
        each residual add rides in an RMSNorm launch (kernels.norm.ops.rms_norm with a residual), as vLLM does, or at
        one row on Hopper in the next projection's GEMV (RMSNorm.forward_into: no norm launch)."""
        proj, residual = self.head(x, residual)
        return self.tail(self.mixer.core(proj, *mixer_args), proj, residual)

    def head(self, x: torch.Tensor, residual, outs=None) -> tuple:
        """forward's part before the mixer's core: the input norm (with the residual add) and the mixer's
        projections -> (proj, h). outs: one buffer per projection launch (mixer.projection_widths) to write into."""
        if residual is None:
            normed, residual = self.input_layernorm(x), x
        else:
            normed, residual = self.input_layernorm.forward_into(x, residual, _input_linear(self.mixer))
        return self.mixer.project(normed, outs), residual

    def tail(self, core: torch.Tensor, proj: tuple, residual: torch.Tensor) -> tuple:
        """forward's part after the mixer's core: mixer.finish, the residual add + post-attention norm and the MLP
        -> (mlp output, h)."""
        mixed = self.mixer.finish(core, proj)
        normed, residual = self.post_attention_layernorm.forward_into(mixed, residual, _input_linear(self.mlp))
        return self.mlp(normed), residual


class Qwen3_5ForCausalLM(torch.nn.Module):
    """The text model of transformers `Qwen3_5ForCausalLM` / `Qwen3_5ForConditionalGeneration`, and of
    `Qwen3NextForCausalLM` / `Qwen3_5MoeForCausalLM` (MoE MLP per config.is_moe_layer), packed-batch form.

    Built from `tensors`: canonical name -> tensor (see `worker.models.qwen3_5_weights.tensor_shapes`), already
    in the activation dtype. forward(batch, cache) runs every row of the packed step against `cache`.
    """

    def __init__(self, config: ModelConfig, tensors):
        super().__init__()
        self.config = config
        self.embed_tokens = torch.nn.Parameter(tensors["embed_tokens.weight"], requires_grad=False)
        self.layers = torch.nn.ModuleList(DecoderLayer(config, tensors, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(tensors["norm.weight"], config.rms_norm_eps)
        # tied: the embedding, unless the loader found a different lm_head stored (worker.loader._shapes_to_read)
        self.lm_head = Linear(tensors.get("lm_head.weight", tensors["embed_tokens.weight"]))
        self.rotary = RotaryEmbedding(config.rotary_dim, config.rope_theta, config.rope_type, config.rope_scaling)
        self.cache_index = self._cache_index(config)
        if self.embed_tokens.is_cuda:
            self.fuse_projections()

    def fuse_projections(self) -> int:
        """GPU: one Linear per layer for the projections that read the same input (GDN qkv/z/b/a, attention
        q/k/v, dense MLP gate/up): fewer, larger GEMV launches per step. Returns how many mixers were fused."""
        for layer in self.layers:
            if isinstance(layer.mlp, MLP):
                layer.mlp.fuse_projections()
        return sum(bool(layer.mixer.fuse_projections()) for layer in self.layers)

    @staticmethod
    def _cache_index(config: ModelConfig) -> list:
        """Layer i -> its index among attention layers (into k_cache/v_cache) or among GDN layers."""
        attn, gdn = config.attention_layer_ids, config.gdn_layer_ids
        return [attn.index(i) if i in attn else gdn.index(i) for i in range(config.num_hidden_layers)]

    @torch.no_grad()
    def forward(self, batch: ForwardBatch, cache: ModelCache, all_logits: bool = False,
                hidden: bool = False) -> torch.Tensor:
        """Returns logits [M, V] float32 for the last token of each row in batch.logits_rows, or [T, V]
        for every token when all_logits; hidden: the final-norm hidden states [T, D] (activation dtype) of every
        token instead, for the caller to apply lm_head to the positions it needs (prompt logprobs).
        Writes each row's K/V into its blocks and its GDN state into its slot;
        rows with context_len 0 start from zero state (their slot is reset first)."""
        host = batch.host_rows()
        cache.reset_fresh(host.state_slots, host.context_lens)
        step = self.prepare(batch, cache.block_size)
        return self.run(step, cache, None if all_logits or hidden else batch.last_token_index(), hidden)

    def prepare(self, batch: ForwardBatch, block_size: int) -> "StepInputs":
        """Host-side work of one step (metadata, RoPE tables). On CUDA: the vectorized attention metadata and
        the GDN kernels' row split from batch.host_rows() (no read from the device where the batch carries them,
        so the host queues this step while the one before still runs); on CPU: the per-row reference metadata."""
        cos, sin = self.rotary.cos_sin(batch.positions, self.embed_tokens.dtype)
        if not batch.input_ids.is_cuda:
            return StepInputs(batch.input_ids, cos, sin, PagedAttentionMetadata.from_batch(batch, block_size),
                              None, batch.cu_seqlens, batch.state_slots)
        host = batch.host_rows()
        attn = PagedStepMeta.from_batch(batch, block_size, host.bounds, host.context_lens)
        gdn = GdnStepMeta.from_lists(host.bounds, host.context_lens, host.state_slots, batch.input_ids.device)
        return StepInputs(batch.input_ids, cos, sin, attn, gdn, batch.cu_seqlens, batch.state_slots)

    @torch.no_grad()
    def run(self, step: "StepInputs", cache: ModelCache, last_index=None, hidden: bool = False) -> torch.Tensor:
        """The device work of one step: no host reads on the all-decode CUDA path (CUDA-graph capturable once
        every weight has run once). last_index [M] int64 tokens whose logits are returned (None: all tokens).
        Returns logits [M or T, V] float32, or with hidden the final-norm hidden states [M or T, D]."""
        x, residual = torch.nn.functional.embedding(step.input_ids, self.embed_tokens), None
        for i, layer in enumerate(self.layers):
            x, residual = layer(x, self.core_args(i, step, cache), residual)
        return self.finish(x, residual, last_index, hidden)

    def finish(self, x: torch.Tensor, residual: torch.Tensor, last_index=None, hidden: bool = False) -> torch.Tensor:
        """The last layer's (mlp output, h) [T, D] -> logits [M or T, V] float32 of the tokens at last_index (None:
        all), or with hidden the final-norm hidden states."""
        if last_index is not None:
            x, residual = x[last_index], residual[last_index]
        x, _ = self.norm.forward_into(x, residual, None if hidden else self.lm_head)
        return x if hidden else self.lm_head(x).float()

    def core_args(self, index: int, step: "StepInputs", cache: ModelCache) -> tuple:
        """Layer `index`'s mixer.core arguments after proj: its view of the step and its cache pools."""
        j = self.cache_index[index]
        if self.layers[index].is_attention:
            return step.cos, step.sin, step.attn, cache.k_cache[j], cache.v_cache[j]
        return step.cu_seqlens, step.state_slots, cache.recurrent_state[j], cache.conv_state[j], step.gdn


@dataclass
class StepInputs:
    """What Qwen3_5ForCausalLM.run needs for one step: input_ids [T] int64, cos/sin [T, rotary_dim] (activation
    dtype), attn (PagedAttentionMetadata on CPU, PagedStepMeta on CUDA), gdn (GdnStepMeta on CUDA, None on CPU:
    the plain-torch path), cu_seqlens [N+1] int32, state_slots [N] int64."""
    input_ids: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor
    attn: object
    gdn: object
    cu_seqlens: torch.Tensor
    state_slots: torch.Tensor
