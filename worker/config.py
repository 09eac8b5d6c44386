"""Worker and scheduler processes: the text-model configuration parsed from a checkpoint's config.json (torch-free)."""
import json
import os
from dataclasses import dataclass, field

from worker.checkpoint_errors import MissingFileError, UnsupportedModelError
from worker.quant_config_shape import (check_quantization_config, online_transforms_of, quant_formats_of,
                                       sparsity_format_of)

SUPPORTED_MODEL_TYPES = ("qwen3_5", "qwen3_5_text", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text")
# VLM wrappers: text fields under text_config, tensors under model.language_model.
WRAPPED_TYPES = ("qwen3_5", "qwen3_5_moe")
MOE_TYPES = ("qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text")
FULL, LINEAR = "full_attention", "linear_attention"
# quantization_config quant_methods whose tensors the loader reads (kernels/nvfp4/checkpoint.py layout_of): NVFP4 and
# FP8 of ModelOpt and compressed-tensors, and block FP8 (Qwen's -FP8); GPTQ, AWQ, bitsandbytes, ... store others
QUANT_METHODS = ("modelopt", "compressed-tensors", "fp8")
# compressed-tensors formats (compressed_tensors CompressionFormat) whose tensors that layout reads: NVFP4 codes, FP8 /
# INT8 / naive codes with a scale, or bf16; "pack-quantized" (INT4 / INT8 in int32 words: GPTQ / AWQ W4A16 exports),
# "marlin-24", the sparse formats and MXFP4 store others
CT_FORMATS = ("dense", "naive-quantized", "int-quantized", "float-quantized", "nvfp4-pack-quantized", "mixed-precision")
# RoPE kinds the model computes as transformers does (modeling_rope_utils.py ROPE_INIT_FUNCTIONS); "dynamic" and
# "longrope" re-derive the frequencies from each forward's longest sequence, "llama3" / "proportional" are not built
ROPE_TYPES = ("default", "linear", "yarn")
# The defaults of transformers' config classes for the fields the parser does not default itself, which a config.json
# may leave out (configuration_qwen3_5.py Qwen3_5TextConfig, configuration_qwen3_5_moe.py Qwen3_5MoeTextConfig, which
# has no intermediate_size, configuration_qwen3_next.py Qwen3NextConfig); they were a 'bad or missing field' refusal
_LINEAR_DEFAULTS = {"num_attention_heads": 16, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
                    "linear_key_head_dim": 128, "linear_value_head_dim": 128}
_TEXT_DEFAULTS = {
    "qwen3_5": dict(_LINEAR_DEFAULTS, vocab_size=248320, hidden_size=4096, intermediate_size=12288,
                    num_hidden_layers=32, num_key_value_heads=4),
    "qwen3_5_moe": dict(_LINEAR_DEFAULTS, vocab_size=248320, hidden_size=2048, num_hidden_layers=40,
                        num_key_value_heads=2),
    "qwen3_next": dict(_LINEAR_DEFAULTS, vocab_size=151936, hidden_size=2048, intermediate_size=5632,
                       num_hidden_layers=48, num_key_value_heads=2),
}
# rope_parameters keys that are no scaling parameters (mrope_*: equal t/h/w positions for text reduce to plain RoPE)
_ROPE_BASE_KEYS = ("rope_type", "type", "rope_theta", "partial_rotary_factor", "mrope_section", "mrope_interleaved")


@dataclass
class ModelConfig:
    """Text-model hyper-parameters (model-spec.md 1.2). Dims in elements; eos ids from config.json only."""

    model_type: str
    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel_dim: int
    layer_types: list = field(default_factory=list)
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10_000_000.0
    partial_rotary_factor: float = 0.25
    rope_type: str = "default"
    # rope_parameters' scaling keys (factor, original_max_position_embeddings, beta_fast, ...) for rope_type != default
    rope_scaling: dict = field(default_factory=dict)
    attention_bias: bool = False
    max_position_embeddings: int = 262_144
    tie_word_embeddings: bool = False
    hidden_act: str = "silu"
    eos_token_ids: list = field(default_factory=list)
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    decoder_sparse_step: int = 1
    mlp_only_layers: list = field(default_factory=list)
    norm_topk_prob: bool = True
    # quantization_config's quant_method ("" when the checkpoint has none); the loader reads only QUANT_METHODS
    quant_method: str = ""
    # the compressed-tensors formats named in quantization_config: its "format" and each config group's
    quant_formats: list = field(default_factory=list)
    # compressed-tensors transform_config rotations applied at run time ("group.location"): online_transforms_of
    quant_online_transforms: list = field(default_factory=list)
    # set by the loader when the tensors sit under the other prefix (transformers saves *_text models under
    # model.language_model.); "" = derive from model_type
    language_prefix: str = ""

    @property
    def rotary_dim(self) -> int:
        """Leading head dims that RoPE rotates: int(head_dim * partial_rotary_factor)."""
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def max_model_len(self) -> int:
        """The context vLLM derives from this config (config/model.py _get_and_verify_max_len): max_position_embeddings,
        times a linear rope's factor; a yarn rope's original_max_position_embeddings times its factor."""
        factor = float(self.rope_scaling.get("factor") or 1.0)
        if self.rope_type == "yarn":
            return int(self.rope_scaling["original_max_position_embeddings"] * factor)
        return int(self.max_position_embeddings * (factor if self.rope_type == "linear" else 1.0))

    @property
    def key_dim(self) -> int:
        """Width of the GDN query/key projections: linear_num_key_heads * linear_key_head_dim (H * K)."""
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def value_dim(self) -> int:
        """Width of the GDN value projection: linear_num_value_heads * linear_value_head_dim (HV * V)."""
        return self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def conv_dim(self) -> int:
        """GDN conv channels: [q ; k ; v] = 2 * key_dim + value_dim."""
        return 2 * self.key_dim + self.value_dim

    @property
    def attention_layer_ids(self) -> list:
        """Indices of the full-attention layers in layer_types order."""
        return [i for i, t in enumerate(self.layer_types) if t == FULL]

    @property
    def gdn_layer_ids(self) -> list:
        """Indices of the linear-attention (Gated DeltaNet) layers in layer_types order."""
        return [i for i, t in enumerate(self.layer_types) if t == LINEAR]

    @property
    def weight_prefix(self) -> str:
        """Prefix of the language-model tensors on disk: the VLM wrapper nests them under language_model."""
        if self.language_prefix:
            return self.language_prefix
        return "model.language_model." if self.model_type in WRAPPED_TYPES else "model."

    @property
    def is_moe(self) -> bool:
        """A MoE family (qwen3_next, qwen3_5_moe*) with experts: some or all layers use the sparse MoE MLP."""
        return self.model_type in MOE_TYPES and self.num_experts > 0

    def is_moe_layer(self, index: int) -> bool:
        """Layer `index` uses the sparse MoE block (transformers `Qwen3NextDecoderLayer.__init__`): not in
        mlp_only_layers and (index + 1) % decoder_sparse_step == 0; else the dense MLP of intermediate_size."""
        return (self.is_moe and index not in self.mlp_only_layers
                and (index + 1) % self.decoder_sparse_step == 0)

    @staticmethod
    def from_dict(raw: dict, source: str = "config.json") -> "ModelConfig":
        """Parses a config.json dict; raises UnsupportedModelError naming `source` for unknown types."""
        model_type = raw.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            supported = ", ".join(SUPPORTED_MODEL_TYPES)
            raise UnsupportedModelError(source, f"model_type {model_type!r} (supported: {supported})")
        text = raw.get("text_config") if model_type in WRAPPED_TYPES else raw
        if not isinstance(text, dict):
            raise UnsupportedModelError(source, f"model_type {model_type} without a text_config block")
        check_quantization_config(raw.get("quantization_config"), source)
        try:
            return _parse_text(model_type, raw, text)
        except (KeyError, TypeError, ValueError) as exc:
            raise UnsupportedModelError(source, f"bad or missing field: {exc}") from exc

    @staticmethod
    def from_file(path: str) -> "ModelConfig":
        """Reads `path` (a config.json or the folder holding it)."""
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        if not os.path.isfile(path):
            raise MissingFileError(path)
        with open(path, encoding="utf-8") as f:
            try:
                raw = json.load(f)
            except json.JSONDecodeError as exc:
                raise MissingFileError(path, f"not valid JSON ({exc})") from exc
        return ModelConfig.from_dict(raw, source=path)


def _as_list(value) -> list:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]


def _layer_types(text: dict, num_layers: int) -> list:
    types = text.get("layer_types")
    if types is None:
        interval = int(text.get("full_attention_interval", 4))
        types = [FULL if (i + 1) % interval == 0 else LINEAR for i in range(num_layers)]
    if len(types) != num_layers or any(t not in (FULL, LINEAR) for t in types):
        raise ValueError(f"layer_types must list {num_layers} of {FULL!r}/{LINEAR!r}")
    return list(types)


def _rope_fields(text: dict) -> dict:
    """RoPE fields as transformers standardises them (modeling_rope_utils.py convert_rope_params_to_dict,
    standardize_rope_params): a legacy rope_scaling dict wins over rope_parameters; rope_theta and
    partial_rotary_factor from that dict, else the top level, else 10000.0 (default_theta) and 0.25 (the
    Qwen3_5TextConfig / Qwen3NextConfig default); rope_type from "rope_type" or the legacy "type"; yarn's
    original_max_position_embeddings from the top level, else the dict, else max_position_embeddings (32768 when
    absent, transformers' default), and its factor when null max_position_embeddings / that."""
    rope = text.get("rope_scaling") or text.get("rope_parameters") or {}
    rope_type = str(rope.get("rope_type", rope.get("type", "default")))
    scaling = {} if rope_type == "default" else {k: v for k, v in rope.items() if k not in _ROPE_BASE_KEYS}
    if rope_type == "yarn":
        max_positions = int(text.get("max_position_embeddings", 32768))
        pretrained = scaling.get("original_max_position_embeddings", max_positions)
        scaling["original_max_position_embeddings"] = int(text.get("original_max_position_embeddings", pretrained))
        if scaling.get("factor") is None:
            scaling["factor"] = max_positions / scaling["original_max_position_embeddings"]
    if rope_type == "linear" and not isinstance(scaling.get("factor"), (int, float)):
        raise ValueError("rope_parameters of rope_type linear need a number 'factor'")
    return {"rope_theta": float(rope.get("rope_theta", text.get("rope_theta", 10_000.0))),
            "partial_rotary_factor": float(rope.get("partial_rotary_factor", text.get("partial_rotary_factor", 0.25))),
            "rope_type": rope_type, "rope_scaling": scaling}


def _parse_text(model_type: str, raw: dict, text: dict) -> ModelConfig:
    text = {**_TEXT_DEFAULTS[model_type.removesuffix("_text")], **text}
    num_layers = int(text["num_hidden_layers"])
    hidden = int(text["hidden_size"])
    heads = int(text["num_attention_heads"])
    eos = _as_list(raw.get("eos_token_id")) + _as_list(text.get("eos_token_id"))
    architectures = raw.get("architectures") or [model_type]
    return ModelConfig(
        model_type=model_type,
        architecture=architectures[0],
        vocab_size=int(text["vocab_size"]),
        hidden_size=hidden,
        intermediate_size=int(text.get("intermediate_size", 0)),
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        num_key_value_heads=int(text["num_key_value_heads"]),
        # transformers' Qwen3_5TextConfig / Qwen3NextConfig default head_dim is 256, not hidden_size // heads
        head_dim=int(text.get("head_dim", 256) or hidden // heads),
        linear_num_key_heads=int(text["linear_num_key_heads"]),
        linear_num_value_heads=int(text["linear_num_value_heads"]),
        linear_key_head_dim=int(text["linear_key_head_dim"]),
        linear_value_head_dim=int(text["linear_value_head_dim"]),
        linear_conv_kernel_dim=int(text.get("linear_conv_kernel_dim", 4)),
        layer_types=_layer_types(text, num_layers),
        rms_norm_eps=float(text.get("rms_norm_eps", 1e-6)),
        # transformers' default (Qwen3_5TextConfig, Qwen3NextConfig, Qwen3_5MoeTextConfig), which vLLM's
        # max_model_len derives from when config.json omits it
        max_position_embeddings=int(text.get("max_position_embeddings", 32768)),
        # either block may carry it (Qwen3_5ForCausalLM reads text_config's, the VLM wrapper its own): a head the
        # checkpoint lacks is the embedding when one says so; a stored head is read anyway (loader._shapes_to_read)
        tie_word_embeddings=bool(raw.get("tie_word_embeddings")) or bool(text.get("tie_word_embeddings")),
        hidden_act=str(text.get("hidden_act", "silu")),
        attention_bias=bool(text.get("attention_bias", False)),
        eos_token_ids=list(dict.fromkeys(eos)),
        quant_method=str((raw.get("quantization_config") or {}).get("quant_method") or ""),
        quant_formats=quant_formats_of(raw.get("quantization_config") or {}) + sparsity_format_of(raw),
        quant_online_transforms=online_transforms_of(raw.get("quantization_config") or {}),
        **_rope_fields(text),
        **_moe_fields(model_type, text),
    )


def _moe_fields(model_type: str, text: dict) -> dict:
    """MoE fields with transformers' defaults (configuration_qwen3_next.py 512/10 experts, configuration_qwen3_5_moe.py
    256/8); qwen3_5_moe has no decoder_sparse_step / mlp_only_layers / norm_topk_prob: every layer MoE, renormalised."""
    if model_type not in MOE_TYPES:
        return {"num_experts": int(text.get("num_experts", 0) or 0)}
    next_type = model_type == "qwen3_next"
    fields = {
        "num_experts": int(text.get("num_experts", 512 if next_type else 256)),
        "num_experts_per_tok": int(text.get("num_experts_per_tok", 10 if next_type else 8)),
        "moe_intermediate_size": int(text.get("moe_intermediate_size", 512)),
        "shared_expert_intermediate_size": int(text.get("shared_expert_intermediate_size", 512)),
    }
    if next_type:
        fields.update(decoder_sparse_step=int(text.get("decoder_sparse_step", 1)),
                      mlp_only_layers=_as_list(text.get("mlp_only_layers")),
                      norm_topk_prob=bool(text.get("norm_topk_prob", True)))
    if fields["num_experts"] > 0 and not 0 < fields["num_experts_per_tok"] <= fields["num_experts"]:
        raise ValueError(f"num_experts_per_tok must be in 1..num_experts ({fields['num_experts']})")
    if fields.get("decoder_sparse_step", 1) < 1:
        raise ValueError("decoder_sparse_step must be >= 1")
    return fields
