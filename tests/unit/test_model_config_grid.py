"""Unit tests (CPU, fp32): config fields real checkpoints vary that the tiny models keep fixed give transformers'
logits on the same folder, through chunked prefill and mixed decode / prefill steps: key and value head counts
(GQA 1..3 heads, linear value heads 3x the key heads), head_dim unlike hidden / heads, conv kernels 2, 3 and 5,
partial_rotary_factor 0.5 and 1.0, explicit layer_types, rms_norm_eps, tied and untied heads, rope fields at the
top level (Qwen3-Next's published form) or in rope_parameters with mrope_section (Qwen3.5's), the VLM wrapper with
text_config, weights stored fp16, and Qwen3-Next's MoE switches (decoder_sparse_step, mlp_only_layers,
norm_topk_prob). The cases sample what a random sweep varied (171 configs of the three classes against
transformers 5.23, prefill, decode and chunked steps: all within 4e-6 relative)."""
import json
import os

import pytest
import torch
from safetensors.torch import load_file, save_file

from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.loader import load_model

transformers = pytest.importorskip("transformers")
COMMON = {"vocab_size": 96, "hidden_size": 48, "intermediate_size": 40, "linear_key_head_dim": 8,
          "linear_value_head_dim": 12}
CASES = {
    "qwen3_5-wrapper-fp16-mrope": ("Qwen3_5ForCausalLM", "Qwen3_5TextConfig", dict(
        COMMON, num_hidden_layers=4, num_attention_heads=6, num_key_value_heads=3, head_dim=24,
        linear_num_key_heads=1, linear_num_value_heads=3, linear_conv_kernel_dim=5, rms_norm_eps=1e-5,
        layer_types=["linear_attention", "full_attention", "full_attention", "linear_attention"],
        tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 1e6,
                                                   "partial_rotary_factor": 0.5, "mrope_section": [2, 2, 2],
                                                   "mrope_interleaved": True}), "float16"),
    "qwen3_next-top-level-rope-moe": ("Qwen3NextForCausalLM", "Qwen3NextConfig", dict(
        COMMON, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=1, head_dim=16,
        linear_num_key_heads=2, linear_num_value_heads=6, linear_conv_kernel_dim=2, rms_norm_eps=1e-3,
        full_attention_interval=2, rope_theta=5e6, partial_rotary_factor=1.0, rope_scaling=None,
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24, shared_expert_intermediate_size=32,
        norm_topk_prob=False, decoder_sparse_step=2, mlp_only_layers=[3]), "bfloat16"),
    "qwen3_5_moe-yarn-kernel3": ("Qwen3_5MoeForCausalLM", "Qwen3_5MoeTextConfig", dict(
        COMMON, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=2, head_dim=32,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_conv_kernel_dim=3, full_attention_interval=3,
        num_experts=4, num_experts_per_tok=1, moe_intermediate_size=24, shared_expert_intermediate_size=16,
        rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "partial_rotary_factor": 0.25, "factor": 2.0,
                         "original_max_position_embeddings": 16}), "float32"),
}
# (first step, chunk sizes) per sequence: chunks shorter than the conv kernel, decode rows beside prefill rows
SCHEDULE = [(0, [9, 1, 2, 1]), (0, [3, 1, 1, 17]), (1, [1, 5, 1])]


def _folder(tmp_path, name):
    """transformers' model of CASES[name] with perturbed random weights, saved, then rewritten as a published
    checkpoint writes it: config.json as given (a qwen3_5 / qwen3_5_moe one wrapped in text_config, its tensors under
    model.language_model.), tensors in the case's dtype."""
    cls_name, config_name, text, dtype = CASES[name]
    torch.manual_seed(0)
    model = getattr(transformers, cls_name)(getattr(transformers, config_name)(**json.loads(json.dumps(text))))
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    folder = str(tmp_path / name)
    model.save_pretrained(folder)
    path = os.path.join(folder, "model.safetensors")
    weights = {k: v.to(getattr(torch, dtype)) for k, v in load_file(path).items()}
    config = dict(text, model_type=model.config.model_type, dtype=dtype)
    if name.startswith("qwen3_5-wrapper"):
        weights = {k.replace("model.", "model.language_model.", 1): v for k, v in weights.items()}
        config = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "dtype": dtype,
                  "tie_word_embeddings": text["tie_word_embeddings"], "text_config": config}
    save_file(weights, path, metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    reference, info = getattr(transformers, cls_name).from_pretrained(folder, dtype=torch.float32,
                                                                      output_loading_info=True)
    assert not info["missing_keys"] and not info["mismatched_keys"], info
    return folder, reference.eval()


@pytest.mark.parametrize("name", list(CASES))
def test_chunked_and_mixed_steps_give_transformers_logits(name, tmp_path):
    folder, reference = _folder(tmp_path, name)
    model, config = load_model(folder, progress=False)
    seqs = [torch.randint(0, config.vocab_size, (sum(chunks),), generator=torch.Generator().manual_seed(i)).tolist()
            for i, (_, chunks) in enumerate(SCHEDULE)]
    blocks, slots = [[5, 0, 7], [2, 6, 1], [3, 4]], [2, 0, 3]
    cache = ModelCache(config, num_blocks=8, block_size=8, num_slots=4, device="cpu", dtype=torch.float32)
    steps = {}
    for i, (first, chunks) in enumerate(SCHEDULE):
        for k, size in enumerate(chunks):
            lo = sum(chunks[:k])
            steps.setdefault(first + k, []).append((i, lo, lo + size))
    worst, checked = 0.0, 0
    for index in sorted(steps):
        rows = [(seqs[i][lo:hi], lo, slots[i], blocks[i], True) for i, lo, hi in steps[index]]
        got = model(ForwardBatch.from_rows(rows, 8), cache)
        for r, (i, _, hi) in enumerate(steps[index]):
            with torch.no_grad():
                want = reference(torch.tensor([seqs[i][:hi]]), use_cache=False).logits[0, -1].float()
            worst = max(worst, ((got[r] - want).abs().max() / want.abs().max()).item())
            checked += 1
    assert checked == sum(len(c) for _, c in SCHEDULE)
    assert worst < 1e-4, worst
