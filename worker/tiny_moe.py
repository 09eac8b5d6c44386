"""Build step / tests: configs and on-disk layouts of the tiny Qwen3-Next and Qwen3.5-MoE checkpoints (worker.tiny --arch)."""
import torch

from kernels.nvfp4.checkpoint import split_fused_experts
from worker.config import ModelConfig

ARCHS = ("qwen3_5", "qwen3_next", "qwen3_5_moe")
NUM_LAYERS = 4
_GDN_DIMS = {"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 32,
             "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4}
_ATTN_DIMS = {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32}
_MOE_DIMS = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
             "shared_expert_intermediate_size": 64}


def _layer_types() -> list:
    return ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(NUM_LAYERS)]


def qwen3_next_config_dict(vocab_size: int, eos_id: int, endoftext_id: int) -> dict:
    """config.json of the tiny Qwen3-Next (model-spec.md 1.11): top-level fields, hidden 64, 4 layers (layer 3 full
    attention), 4 experts top-2, r = HV/H = 2; layer 1 is in mlp_only_layers (dense MLP of intermediate_size)."""
    return {
        "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "vocab_size": vocab_size,
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": NUM_LAYERS, "full_attention_interval": 4,
        "layer_types": _layer_types(), **_ATTN_DIMS, **_GDN_DIMS, **_MOE_DIMS, "decoder_sparse_step": 1,
        "mlp_only_layers": [1], "norm_topk_prob": True, "hidden_act": "silu", "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "partial_rotary_factor": 0.25, "max_position_embeddings": 8192,
        "tie_word_embeddings": False, "attention_bias": False, "bos_token_id": endoftext_id,
        "eos_token_id": eos_id, "dtype": "bfloat16",
    }


def qwen3_5_moe_config_dict(vocab_size: int, eos_id: int, endoftext_id: int) -> dict:
    """config.json of the tiny Qwen3.5-MoE: the `qwen3_5_moe` VLM wrapper with text_config (every layer MoE)."""
    text = {
        "model_type": "qwen3_5_moe_text", "vocab_size": vocab_size, "hidden_size": 64,
        "num_hidden_layers": NUM_LAYERS, "full_attention_interval": 4, "layer_types": _layer_types(),
        **_ATTN_DIMS, **_GDN_DIMS, **_MOE_DIMS, "hidden_act": "silu", "rms_norm_eps": 1e-6,
        "max_position_embeddings": 8192, "tie_word_embeddings": False, "attention_bias": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [2, 1, 1], "mrope_interleaved": True},
        "eos_token_id": endoftext_id, "dtype": "bfloat16",
    }
    vision = {"model_type": "qwen3_5_moe_vision", "depth": 1, "hidden_size": 32, "num_heads": 2,
              "intermediate_size": 64, "out_hidden_size": 64, "patch_size": 16, "spatial_merge_size": 2,
              "temporal_patch_size": 2}
    return {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
            "text_config": text, "vision_config": vision, "eos_token_id": eos_id, "tie_word_embeddings": False}


def fuse_qkvz(qkv: torch.Tensor, z: torch.Tensor, b: torch.Tensor, a: torch.Tensor, num_k_heads: int,
              head_k_dim: int) -> tuple:
    """Inverse of `worker.layers.gdn.split_fused_qkvz`: qkv [2*H*dk + HV*dv, D], z [HV*dv, D], b, a [HV, D] ->
    (in_proj_qkvz [2*H*dk + 2*HV*dv, D] rows per key head [q_g, k_g, v_g, z_g], in_proj_ba [2*HV, D] [b_g, a_g])."""
    key_dim, width = num_k_heads * head_k_dim, qkv.shape[-1]
    parts = (qkv[:key_dim], qkv[key_dim:2 * key_dim], qkv[2 * key_dim:], z, b, a)
    grouped = [t.reshape(num_k_heads, -1, width) for t in parts]
    return (torch.cat(grouped[:4], dim=1).reshape(-1, width), torch.cat(grouped[4:], dim=1).reshape(-1, width))


def to_qwen3_next_layout(config: ModelConfig, weights: dict) -> dict:
    """Disk name -> tensor in the Qwen3.5 layout -> Qwen3-Next's real layout: fused linear_attn.in_proj_qkvz /
    in_proj_ba per layer, experts stored one tensor per expert and projection (insertion order kept)."""
    out = {}
    for name, tensor in weights.items():
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            out.update(split_fused_experts(name, tensor))
        elif name.endswith("linear_attn.in_proj_qkv.weight"):
            prefix = name[:-len("in_proj_qkv.weight")]
            qkvz, ba = fuse_qkvz(tensor, weights[prefix + "in_proj_z.weight"], weights[prefix + "in_proj_b.weight"],
                                 weights[prefix + "in_proj_a.weight"], config.linear_num_key_heads,
                                 config.linear_key_head_dim)
            out[prefix + "in_proj_qkvz.weight"], out[prefix + "in_proj_ba.weight"] = qkvz, ba
        elif not name.endswith(("in_proj_z.weight", "in_proj_b.weight", "in_proj_a.weight")):
            out[name] = tensor
    return out
