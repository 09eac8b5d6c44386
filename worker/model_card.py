"""Scheduler and worker processes: a checkpoint's serving card (ids, context, tokenizer, template), torch-free."""
import hashlib
import json
import os

from worker.checkpoint_errors import MissingFileError, check_folder, check_not_lfs_pointer
from worker.config import ModelConfig
from worker.quant_config_shape import check_quantization_config, quant_formats_of


def _read_json(path: str, required: bool) -> dict:
    if not os.path.isfile(path):
        if required:
            raise MissingFileError(path)
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError) as exc:
        raise MissingFileError(path, f"unreadable ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise MissingFileError(path, f"not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise MissingFileError(path, f"not a JSON object (a {type(data).__name__})")
    return data


def _ids(value) -> list:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]


def _token_id(tokenizer_json: bytes, token):
    """The id of tokenizer_config.json's `eos_token` (its text, or an AddedToken dict's "content") in tokenizer.json
    (added tokens, then the model's vocabulary); None when absent or not found."""
    text = token.get("content") if isinstance(token, dict) else token
    if not isinstance(text, str) or text.encode("utf-8") not in tokenizer_json:
        return None
    spec = json.loads(tokenizer_json)
    for added in spec.get("added_tokens") or []:
        if added.get("content") == text:
            return added.get("id")
    vocab = (spec.get("model") or {}).get("vocab")
    return vocab.get(text) if isinstance(vocab, dict) else None


def _chat_template(folder: str) -> str:
    """chat_template.jinja, else tokenizer_config.json's `chat_template` (a string, or the "default" of a named list),
    as transformers' AutoTokenizer loads it (tokenization_utils_base._from_pretrained: the file takes priority over
    the config's entry) and vLLM renders with it. A checkpoint may carry both, its template fixed in the .jinja and
    the config's left as it was: the config's won here, so the prompt was not the one vLLM renders."""
    jinja = os.path.join(folder, "chat_template.jinja")
    if os.path.isfile(jinja):
        with open(jinja, encoding="utf-8") as f:
            return f.read()
    template = _read_json(os.path.join(folder, "tokenizer_config.json"), required=False).get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    return template if isinstance(template, str) else ""


def estimate_num_parameters(config: ModelConfig) -> int:
    """Language-model parameter count implied by the config (dense or MoE MLP per layer; excludes vision tower
    and MTP)."""
    d, vocab = config.hidden_size, config.vocab_size
    attn = d * config.num_attention_heads * config.head_dim * 3 + 2 * d * config.num_key_value_heads * config.head_dim
    attn += 2 * config.head_dim
    hv, kc = config.linear_num_value_heads, config.linear_conv_kernel_dim
    gdn = d * (config.conv_dim + config.value_dim + 2 * hv) + config.conv_dim * kc + 2 * hv
    gdn += config.linear_value_head_dim + config.value_dim * d
    dense = 3 * d * config.intermediate_size
    moe = config.num_experts * (d + 3 * d * config.moe_intermediate_size)
    moe += 3 * d * config.shared_expert_intermediate_size + d
    layers = len(config.attention_layer_ids) * attn + len(config.gdn_layer_ids) * gdn
    layers += sum((moe if config.is_moe_layer(i) else dense) + 2 * d for i in range(config.num_hidden_layers))
    heads = vocab * d * (1 if config.tie_word_embeddings else 2)
    return layers + heads + d


def legacy_quantization(folder: str) -> dict:
    """The "quantization" object of ModelOpt's legacy hf_quant_config.json ({} without one), its JSON types checked as
    config.json's quantization_config is (worker/quant_config_shape.py); a "quantization" of "NVFP4" died with
    AttributeError ('str' object has no attribute 'get') in make run's preflight and the loader. Raises
    MissingFileError (not JSON, not an object) or UnsupportedModelError naming the field."""
    path = os.path.join(folder, "hf_quant_config.json")
    section = _read_json(path, required=False).get("quantization")
    check_quantization_config(section, path, block="quantization")
    return section or {}


def quantization_of(folder: str, raw_config: dict) -> str:
    """'bf16' | 'nvfp4' | 'mixed' | 'fp8' | the producer's method, from config.json `quantization_config` or the
    legacy hf_quant_config.json (model-spec.md section 2.3-2.4); torch-free for the scheduler."""
    qc = raw_config.get("quantization_config") or {}
    if not qc:
        qc = legacy_quantization(folder)
    if not qc:
        return "bf16"
    algo, formats = str(qc.get("quant_algo") or "").upper(), set(quant_formats_of(qc))
    # compressed-tensors names the format per config group too: "mixed-precision" (or no top-level format) over
    # groups of nvfp4-pack-quantized and float-quantized Linears (unsloth's Qwen3.8-27B-NVFP4) is mixed
    if algo == "MIXED_PRECISION" or len(formats) > 1 or "mixed-precision" in formats:
        return "mixed"
    fmt = next(iter(formats), "")
    if "NVFP4" in algo or fmt.startswith("nvfp4"):
        return "nvfp4"
    if "FP8" in algo or fmt == "float-quantized":
        return "fp8"
    return str(qc.get("quant_method") or "quantized")


def load_model_card(path: str) -> dict:
    """Reads config.json, generation_config.json, tokenizer.json, tokenizer_config.json of folder `path`.

    Returns {model_id, max_context_len, eos_token_ids (config.json + generation_config.json + the tokenizer's
    eos_token, which vLLM stops at as the request's eos_token_id; de-duplicated),
    tokenizer_json (bytes), chat_template (str, "" if none), generation_config_json (str, "{}" if none),
    architecture, model_type, vocab_size, num_parameters (estimate), quantization (see quantization_of),
    checkpoint_digest (checkpoint_digest)}.
    Raises MissingFileError (config.json / tokenizer.json absent or unreadable), UnsupportedModelError.
    """
    folder = os.path.abspath(path)
    check_folder(folder)
    config_path = os.path.join(folder, "config.json")
    raw = _read_json(config_path, required=True)
    config = ModelConfig.from_dict(raw, source=config_path)
    gen_path = os.path.join(folder, "generation_config.json")
    generation = _read_json(gen_path, required=False)
    tok_path = os.path.join(folder, "tokenizer.json")
    if not os.path.isfile(tok_path):
        raise MissingFileError(tok_path)
    check_not_lfs_pointer(tok_path)
    with open(tok_path, "rb") as f:
        tokenizer_json = f.read()
    gen_text = "{}"
    if generation:
        with open(gen_path, encoding="utf-8") as f:
            gen_text = f.read()
    tokenizer_eos = _ids(_token_id(tokenizer_json, _read_json(os.path.join(folder, "tokenizer_config.json"),
                                                             required=False).get("eos_token")))
    eos = list(dict.fromkeys(config.eos_token_ids + _ids(generation.get("eos_token_id")) + tokenizer_eos))
    return {
        "model_id": os.path.basename(folder.rstrip(os.sep)),
        "max_context_len": config.max_model_len,
        "eos_token_ids": eos,
        "tokenizer_json": tokenizer_json,
        "chat_template": _chat_template(folder),
        "generation_config_json": gen_text,
        "architecture": config.architecture,
        "model_type": config.model_type,
        "vocab_size": config.vocab_size,
        "num_parameters": estimate_num_parameters(config),
        "quantization": quantization_of(folder, raw),
        "checkpoint_digest": checkpoint_digest(config_path, tokenizer_json),
    }


def checkpoint_digest(config_path: str, tokenizer_json: bytes) -> str:
    """16 hex digits of sha256 over config.json's bytes and tokenizer.json's: equal for one checkpoint wherever it is
    mounted, unequal for another model, size or quantization (the scheduler and the worker compare theirs)."""
    with open(config_path, "rb") as f:
        digest = hashlib.sha256(f.read())
    digest.update(b"\0")
    digest.update(tokenizer_json)
    return digest.hexdigest()[:16]
