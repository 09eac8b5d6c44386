"""Build step (`make model`): writes the deterministic tiny Qwen3.5 checkpoint (weights, tokenizer, template) to a folder."""
import argparse
import json
import math
import os
import zlib

import torch
from safetensors.torch import save_file
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from worker.config import ModelConfig
from worker.models.qwen3_5_weights import disk_name, tensor_shapes
from worker.tiny_moe import ARCHS, qwen3_5_moe_config_dict, qwen3_next_config_dict, to_qwen3_next_layout

SEED = 20260209
NUM_TRAINED_TOKENS = 1015
# (content, special): the Qwen ChatML / tool / reasoning markers, appended after the trained vocabulary.
# As in Qwen's own tokenizers, only the ChatML markers are "special" (dropped by skip_special_tokens);
# tool and think tags stay visible in decoded text so parsers can see them.
ADDED_TOKENS = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<tool_call>", False), ("</tool_call>", False), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
]
# Qwen3.5 pre-tokenizer split (transformers tokenization_qwen3_5.py PRETOKENIZE_REGEX).
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
TEMPLATE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets", "chat_template.jinja")

CORPUS = """
The quick brown fox jumps over the lazy dog. A small model can still say hello to the world.
Hello! How are you today? I am fine, thank you. What would you like to talk about?
Once upon a time there was a little server that answered every question with patience and care.
It read the question, thought about it step by step, and then wrote a short and helpful answer.
The weather is sunny in the morning and rainy in the evening; take an umbrella when you go outside.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 42 100 256 1024 2048 4096 8192 3.14159 2.71828 1e-6 -7.5 +3
Dates and times: 2026-11-29 08:05:12 UTC, Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday.
Questions people ask: what is the capital of France? Paris is the capital of France. Why is the sky blue?
Because sunlight scatters in the air, and blue light scatters the most. How many legs does a spider have?
A spider has eight legs. Can you write a poem? Roses are red, violets are blue, tokens are counted, and so are you.
def add(a, b):
    return a + b

class Counter:
    def __init__(self):
        self.count = 0

    def step(self, amount=1):
        self.count += amount
        return self.count

for i in range(10):
    print(f"step {i}: {i * i}")
import json, os, sys
if __name__ == "__main__":
    main()
{"name": "get_weather", "arguments": {"city": "Berlin", "unit": "celsius"}}
{"type": "function", "function": {"name": "search", "description": "Search the web", "parameters": {"type": "object",
"properties": {"query": {"type": "string"}}, "required": ["query"]}}}
<tool_call>
<function=get_weather>
<parameter=city>
Berlin
</parameter>
</function>
</tool_call>
<tool_response>
{"temperature": 21, "condition": "sunny"}
</tool_response>
<think>
The user wants the weather. I should call the tool, then answer in one sentence.
</think>
The weather in Berlin is sunny with a temperature of 21 degrees.
<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Tell me a joke about computers.<|im_end|>
<|im_start|>assistant
Why did the computer go to the doctor? Because it had a virus!<|im_end|>
Lists: apples, bananas, cherries, dates, elderberries, figs, grapes. Colours: red, green, blue, yellow, purple.
Mathematics: two plus two equals four; the square root of nine is three; seven times eight is fifty-six.
Science: water boils at one hundred degrees Celsius at sea level. Light travels very fast.
History: people built cities, wrote books, invented machines, and learned to fly across the oceans.
Programming languages: Python, Rust, C, C++, Go, Java, JavaScript, TypeScript, Haskell, Zig.
SELECT id, name FROM users WHERE age > 30 ORDER BY name LIMIT 10;
fn main() { let x: i32 = 5; println!("{}", x); }
#include <stdio.h>
int main(void) { printf("hello\\n"); return 0; }
Unicode: café, naïve, résumé, Straße, Ελληνικά, русский язык, العربية, हिन्दी, 日本語のテキスト, 中文文本, 한국어 텍스트.
你好，世界！今天天气很好。我们一起学习吧。こんにちは、元気ですか？ 안녕하세요, 반갑습니다.
Emoji: 😀 😃 😄 😁 🚀 🌍 ✨ 🎉 👍 ❤️ 🔥 🤖 🧠 📚
"""


def tiny_config_dict(vocab_size: int, eos_id: int, endoftext_id: int) -> dict:
    """config.json of the tiny model: the real `qwen3_5` layout with text_config and vision_config blocks."""
    num_layers = 8
    text = {
        "model_type": "qwen3_5_text", "vocab_size": vocab_size, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": num_layers, "full_attention_interval": 4,
        "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(num_layers)],
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "attn_output_gate": True,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 32,
        "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4, "hidden_act": "silu", "rms_norm_eps": 1e-6,
        "max_position_embeddings": 8192, "tie_word_embeddings": False, "attention_bias": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [2, 1, 1], "mrope_interleaved": True},
        "eos_token_id": endoftext_id, "dtype": "bfloat16", "mamba_ssm_dtype": "float32",
    }
    vision = {"model_type": "qwen3_5_vision", "depth": 1, "hidden_size": 32, "num_heads": 2,
              "intermediate_size": 64, "out_hidden_size": 64, "patch_size": 16, "spatial_merge_size": 2,
              "temporal_patch_size": 2}
    return {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
            "text_config": text, "vision_config": vision, "eos_token_id": eos_id, "tie_word_embeddings": False}


def train_tokenizer() -> Tokenizer:
    """Byte-level BPE on CORPUS (every byte is a base token, so any UTF-8 text round-trips), plus ADDED_TOKENS."""
    tokenizer = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, fuse_unk=False))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=NUM_TRAINED_TOKENS, min_frequency=1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tokenizer.train_from_iterator(CORPUS.strip().split("\n"), trainer=trainer)
    for content, special in ADDED_TOKENS:
        token = AddedToken(content, special=special, normalized=False)
        (tokenizer.add_special_tokens if special else tokenizer.add_tokens)([token])
    return tokenizer


def _init(name: str, shape: tuple) -> torch.Tensor:
    """Seeded per tensor (crc32 of its name), so each tensor is independent of the others' shapes."""
    gen = torch.Generator().manual_seed(SEED + zlib.crc32(name.encode()))
    if name.endswith("A_log"):
        return torch.empty(shape).uniform_(0.1, 2.0, generator=gen).log()
    if name.endswith("dt_bias"):
        return torch.randn(shape, generator=gen) * 0.5 - 1.0
    if name.endswith("linear_attn.norm.weight"):
        return 1.0 + 0.1 * torch.randn(shape, generator=gen)
    if len(shape) == 1:
        # zero-centred RMSNorm offsets: non-zero so a (1 + w) versus w mistake cannot pass the parity tests
        return 0.1 * torch.randn(shape, generator=gen)
    if name.endswith("conv1d.weight"):
        return 0.3 * torch.randn(shape, generator=gen)
    if name.endswith("embed_tokens.weight"):
        return torch.randn(shape, generator=gen)
    return torch.randn(shape, generator=gen) / math.sqrt(shape[-1])


def tiny_weights(config: ModelConfig) -> dict:
    """On-disk name -> tensor: bf16, except A_log and dt_bias which real checkpoints may keep in fp32."""
    out = {}
    for canonical, shape in tensor_shapes(config).items():
        tensor = _init(canonical, shape)
        keep_fp32 = canonical.endswith(("A_log", "dt_bias"))
        out[disk_name(config, canonical)] = tensor.to(torch.float32 if keep_fp32 else torch.bfloat16).contiguous()
    return out


def _tokenizer_config(tokenizer: Tokenizer, template: str) -> dict:
    decoder = {}
    for content, special in ADDED_TOKENS:
        decoder[str(tokenizer.token_to_id(content))] = {
            "content": content, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
            "special": special}
    return {"add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": decoder,
            "bos_token": None, "chat_template": template, "clean_up_tokenization_spaces": False,
            "eos_token": "<|im_end|>", "errors": "replace", "model_max_length": 8192,
            "pad_token": "<|endoftext|>", "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer",
            "unk_token": None}


def _write_json(path: str, obj: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def _read_template() -> str:
    if not os.path.isfile(TEMPLATE_PATH):
        raise FileNotFoundError(f"chat template {TEMPLATE_PATH} is missing (it ships with the source tree)")
    with open(TEMPLATE_PATH, encoding="utf-8") as f:
        return f.read()


def _config_dict(arch: str, vocab_size: int, eos_id: int, endoftext_id: int) -> dict:
    builders = {"qwen3_5": tiny_config_dict, "qwen3_next": qwen3_next_config_dict,
                "qwen3_5_moe": qwen3_5_moe_config_dict}
    if arch not in builders:
        raise ValueError(f"unknown tiny arch {arch!r} (one of {', '.join(ARCHS)})")
    return builders[arch](vocab_size, eos_id, endoftext_id)


def write_tiny_checkpoint(out: str, arch: str = "qwen3_5") -> None:
    """Writes tokenizer.json, tokenizer_config.json, generation_config.json, model.safetensors, then config.json.

    arch: "qwen3_5" (the default `make model` checkpoint), "qwen3_next" (fused in_proj_qkvz / in_proj_ba,
    per-expert tensors, as the real Qwen3-Next files) or "qwen3_5_moe" (fused expert tensors)."""
    os.makedirs(out, exist_ok=True)
    print(f"[tiny] training byte-level BPE tokenizer ({NUM_TRAINED_TOKENS} + {len(ADDED_TOKENS)} tokens)", flush=True)
    tokenizer = train_tokenizer()
    eos_id, endoftext_id = tokenizer.token_to_id("<|im_end|>"), tokenizer.token_to_id("<|endoftext|>")
    tokenizer.save(os.path.join(out, "tokenizer.json"))
    _write_json(os.path.join(out, "tokenizer_config.json"), _tokenizer_config(tokenizer, _read_template()))
    raw = _config_dict(arch, tokenizer.get_vocab_size(with_added_tokens=True), eos_id, endoftext_id)
    _write_json(os.path.join(out, "generation_config.json"), {
        "bos_token_id": endoftext_id, "pad_token_id": endoftext_id, "eos_token_id": [eos_id, endoftext_id],
        "do_sample": True, "temperature": 1.0, "top_k": 20, "top_p": 0.95})
    config = ModelConfig.from_dict(raw)
    print(f"[tiny] generating weights: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
          f"vocab {config.vocab_size}", flush=True)
    weights = tiny_weights(config)
    if arch == "qwen3_next":
        weights = to_qwen3_next_layout(config, weights)
    save_file(weights, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    # Last: config.json is make's mark of a finished model (models/tiny/config.json); written first, a Ctrl-C during
    # the weights left a folder that every later `make run` took as done and the worker could not load.
    _write_json(os.path.join(out, "config.json"), raw)
    size = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out))
    print(f"[tiny] wrote {len(weights)} tensors, {size / 2**20:.1f} MiB to {out}", flush=True)


def main(argv=None) -> None:
    """Entry point `python -m worker.tiny [--out DIR] [--arch A]` (A one of ARCHS, default qwen3_5): writes the
    deterministic tiny checkpoint (`make model`)."""
    parser = argparse.ArgumentParser(prog="python -m worker.tiny",
                                     description="Write a deterministic tiny Qwen3.5 / Qwen3-Next checkpoint.")
    parser.add_argument("--out", default="models/tiny", help="output folder (created if absent)")
    parser.add_argument("--arch", default="qwen3_5", choices=ARCHS, help="model family (default qwen3_5)")
    args = parser.parse_args(argv)
    write_tiny_checkpoint(args.out, args.arch)


if __name__ == "__main__":
    main()
