"""Worker process: tensor names and shapes of a Qwen3.5 / Qwen3-Next text model (loader, generator, model agree here)."""
from worker.config import ModelConfig


def _gdn_shapes(config: ModelConfig, prefix: str) -> dict:
    d, hv = config.hidden_size, config.linear_num_value_heads
    return {
        f"{prefix}in_proj_qkv.weight": (config.conv_dim, d),
        f"{prefix}in_proj_z.weight": (config.value_dim, d),
        f"{prefix}in_proj_b.weight": (hv, d),
        f"{prefix}in_proj_a.weight": (hv, d),
        f"{prefix}conv1d.weight": (config.conv_dim, 1, config.linear_conv_kernel_dim),
        f"{prefix}dt_bias": (hv,),
        f"{prefix}A_log": (hv,),
        f"{prefix}norm.weight": (config.linear_value_head_dim,),
        f"{prefix}out_proj.weight": (d, config.value_dim),
    }


def _attention_shapes(config: ModelConfig, prefix: str) -> dict:
    d, hd = config.hidden_size, config.head_dim
    return {
        f"{prefix}q_proj.weight": (2 * config.num_attention_heads * hd, d),
        f"{prefix}k_proj.weight": (config.num_key_value_heads * hd, d),
        f"{prefix}v_proj.weight": (config.num_key_value_heads * hd, d),
        f"{prefix}o_proj.weight": (d, config.num_attention_heads * hd),
        f"{prefix}q_norm.weight": (hd,),
        f"{prefix}k_norm.weight": (hd,),
    }


def _dense_mlp_shapes(prefix: str, d: int, inter: int) -> dict:
    return {f"{prefix}gate_proj.weight": (inter, d), f"{prefix}up_proj.weight": (inter, d),
            f"{prefix}down_proj.weight": (d, inter)}


def moe_shapes(config: ModelConfig, prefix: str) -> dict:
    """Sparse MoE block tensors under `prefix` (= `layers.{i}.mlp.`), experts in transformers' fused form:
    gate.weight [E, D] (router), experts.gate_up_proj [E, 2*I, D] (gate rows first), experts.down_proj [E, D, I],
    shared_expert.{gate,up,down}_proj.weight, shared_expert_gate.weight [1, D]. On disk the experts may instead be
    `experts.{e}.{gate,up,down}_proj.weight` (the loader stacks them)."""
    d, e, inter = config.hidden_size, config.num_experts, config.moe_intermediate_size
    shapes = {f"{prefix}gate.weight": (e, d), f"{prefix}experts.gate_up_proj": (e, 2 * inter, d),
              f"{prefix}experts.down_proj": (e, d, inter)}
    shapes.update(_dense_mlp_shapes(prefix + "shared_expert.", d, config.shared_expert_intermediate_size))
    shapes[f"{prefix}shared_expert_gate.weight"] = (1, d)
    return shapes


def tensor_shapes(config: ModelConfig) -> dict:
    """Canonical name -> shape of every tensor the model reads, in checkpoint order.

    Canonical names are the on-disk names with the language-model prefix removed (`config.weight_prefix`):
    `embed_tokens.weight`, `layers.{i}.linear_attn.*` / `layers.{i}.self_attn.*`, `layers.{i}.mlp.*` (dense, or
    the MoE block of `moe_shapes` where config.is_moe_layer(i)),
    `layers.{i}.{input,post_attention}_layernorm.weight`, `norm.weight`, and `lm_head.weight` (unless tied).
    """
    d, inter = config.hidden_size, config.intermediate_size
    shapes = {"embed_tokens.weight": (config.vocab_size, d)}
    for i, kind in enumerate(config.layer_types):
        prefix = f"layers.{i}."
        if kind == "linear_attention":
            shapes.update(_gdn_shapes(config, prefix + "linear_attn."))
        else:
            shapes.update(_attention_shapes(config, prefix + "self_attn."))
        if config.is_moe_layer(i):
            shapes.update(moe_shapes(config, prefix + "mlp."))
        else:
            shapes.update(_dense_mlp_shapes(prefix + "mlp.", d, inter))
        shapes[f"{prefix}input_layernorm.weight"] = (d,)
        shapes[f"{prefix}post_attention_layernorm.weight"] = (d,)
    shapes["norm.weight"] = (d,)
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (config.vocab_size, d)
    return shapes


def disk_name(config: ModelConfig, canonical: str) -> str:
    """The checkpoint name of a canonical tensor name. lm_head sits outside the language-model prefix: at the top, or,
    under vLLM's own parameter names (a checkpoint it dumped), at language_model.lm_head beside language_model.model.
    (vLLM qwen3_5.py hf_to_vllm_mapper)."""
    if not canonical.startswith("lm_head."):
        return config.weight_prefix + canonical
    return ("language_model." if config.weight_prefix == "language_model.model." else "") + canonical
