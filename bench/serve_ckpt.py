"""Bench helper (the process of bench/serve_http.py): makes the checkpoint folder a serving bench serves.

`tiny`: worker/tiny.py's model (bf16; NVFP4 through kernels/nvfp4/quantize.py). `27b`: random weights of the
Qwen3.8-27B shape (design.md section 1), its first N layers (3 GDN : 1 attention), written tensor by tensor into
safetensors shards with no bf16 copy first: NVFP4 Linears in the ModelOpt layout as bench/gpu_model.py builds them
(random codes, e4m3 block scales in [0.5, 2], a global scale keeping activations O(1)), the Linears the quantize
recipe keeps (in_proj_a / in_proj_b) and the embedding in bf16, with the tiny model's tokenizer and chat template.
The 27B vocabulary (248320 rows) is larger than that tokenizer's: rows past it are never in a prompt, and the LM
head's rows are zero except those of tokens that decode to whole characters on their own (not the special tokens,
not a lone UTF-8 byte), so a greedy pick streams one chunk of text per token while the step still reads and
multiplies every row (a random head picks ids the tokenizer does not have, which stream no text at all).
A folder that already holds a finished checkpoint of the same spec (bench_spec.json, written last) is reused.
"""
import json
import math
import os
import shutil
import tempfile
import time

import torch
from tokenizers import Tokenizer

from kernels.nvfp4 import checkpoint as nvfp4_checkpoint
from kernels.nvfp4.quantize import SKIP_PROJ, ShardWriter, quant_config, quantize_folder
from worker.checkpoint import SafetensorsCheckpoint
from worker.config import ModelConfig
from worker.models.qwen3_5_weights import disk_name, tensor_shapes
from worker.tiny import _init, write_tiny_checkpoint

SHAPES = ("tiny", "27b")
QUANTS = ("nvfp4", "bf16")
VOCAB_27B = 248320
SHARD_BYTES = 2 << 30
POOL_ELEMENTS = 16 << 20  # each random pool; tensors are tiled from them at random offsets
SPEC_FILE = "bench_spec.json"
SIDE_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")
# E[e2m1^2] over the 16 codes; with e4m3 scales in [0.5, 2] and this global scale W has std ~ 1/sqrt(K)
E2M1_MEAN_SQUARE = 8.6


def text_config_27b(base: dict, num_layers: int, vocab_size: int, shrink: int = 1) -> dict:
    """The tiny text_config `base` with Qwen3.8-27B's dimensions, cut to the first num_layers layers; shrink > 1
    divides the hidden and MLP widths (quick CPU checks; heads and head dims stay)."""
    hidden, inter = 5120 // shrink, 17408 // shrink
    if num_layers < 1 or hidden % 16 or inter % 16:
        raise ValueError(f"27b shape: layers {num_layers} (>= 1), hidden {hidden} and MLP {inter} must be "
                         f"multiples of 16 (shrink {shrink})")
    types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(num_layers)]
    rope = dict(base["rope_parameters"], mrope_section=[11, 11, 10])
    return dict(base, vocab_size=vocab_size, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=num_layers,
                layer_types=types, num_attention_heads=24, num_key_value_heads=4, head_dim=256,
                linear_num_key_heads=16, linear_num_value_heads=48, linear_key_head_dim=128,
                linear_value_head_dim=128, linear_conv_kernel_dim=4, max_position_embeddings=262144,
                rope_parameters=rope)


class RandomFill:
    """Tensors of any size tiled from fixed random pools (u8 codes, e4m3 scales in [0.5, 2], N(0, 1) bf16) from a
    random offset: copy speed instead of the CPU generator's ~0.3 GB/s; decode cost never depends on the values."""

    def __init__(self, seed: int = 0):
        self.gen = torch.Generator().manual_seed(seed)
        self.codes = torch.empty(POOL_ELEMENTS, dtype=torch.uint8).random_(generator=self.gen)
        scales = torch.empty(POOL_ELEMENTS).uniform_(0.5, 2.0, generator=self.gen)
        self.scales = scales.to(torch.float8_e4m3fn).view(torch.uint8)
        self.normal = torch.randn(POOL_ELEMENTS, generator=self.gen).to(torch.bfloat16)

    def tile(self, pool: torch.Tensor, shape: tuple) -> torch.Tensor:
        numel = math.prod(shape)
        out = torch.empty(numel, dtype=pool.dtype)
        pos, start = 0, int(torch.randint(len(pool), (1,), generator=self.gen))
        while pos < numel:
            count = min(numel - pos, len(pool) - start)
            out[pos:pos + count] = pool[start:start + count]
            pos, start = pos + count, 0
        return out.reshape(shape)

    def nvfp4(self, shape: tuple, keep=None) -> dict:
        """ModelOpt tensors (names without prefix) of a random [N, K] Linear; keep: bool [N], rows left zero where
        False (None: none)."""
        n, k = shape
        packed = self.tile(self.codes, (n, k // 2))
        if keep is not None:
            packed[~keep] = 0
        gmul = torch.tensor(1.0 / (math.sqrt(E2M1_MEAN_SQUARE) * 1.2 * math.sqrt(k)), dtype=torch.float32)
        return {"weight": packed, "weight_scale": self.tile(self.scales, (n, k // 16)).view(torch.float8_e4m3fn),
                "weight_scale_2": gmul}

    def dense(self, shape: tuple, keep=None) -> torch.Tensor:
        """A random bf16 [N, K] Linear with std 1/sqrt(K); keep as in nvfp4."""
        weight = self.tile(self.normal, shape) * (1.0 / math.sqrt(shape[-1]))
        if keep is not None:
            weight[~keep] = 0
        return weight


def nvfp4_linear(canonical: str, shape: tuple) -> bool:
    """Whether the 27B writer stores this tensor NVFP4: every Linear (LM head included) but the embedding and the
    GDN's small in_proj_a / in_proj_b, as bench/gpu_model.py's model (kernels/nvfp4/quantize.should_quantize would
    also leave in_proj_qkv / in_proj_z bf16: they do not end in "_proj")."""
    module = canonical[: -len(".weight")].rsplit(".", 1)[-1]
    return len(shape) == 2 and canonical != "embed_tokens.weight" and shape[1] % 16 == 0 and module not in SKIP_PROJ


def _tensors_of(fill: RandomFill, config: ModelConfig, canonical: str, shape: tuple, quant: str,
                keep: torch.Tensor) -> dict:
    """On-disk name -> tensor for one canonical tensor of the 27B shape."""
    name = disk_name(config, canonical)
    if canonical == "embed_tokens.weight":
        return {name: fill.tile(fill.normal, shape)}
    if len(shape) != 2:  # norms, conv1d, A_log, dt_bias: small, seeded per name as in the tiny model
        small = _init(canonical, shape)
        return {name: small.float() if canonical.endswith(("A_log", "dt_bias")) else small.bfloat16()}
    rows = keep if canonical == "lm_head.weight" else None
    if quant == "nvfp4" and nvfp4_linear(canonical, shape):
        prefix = name[: -len(".weight")]
        return {f"{prefix}.{key}": value for key, value in fill.nvfp4(shape, rows).items()}
    return {name: fill.dense(shape, rows)}


def text_rows(tokenizer: Tokenizer, vocab_size: int) -> torch.Tensor:
    """bool [vocab_size]: the ids of trained tokens that decode alone to text with no U+FFFD (no partial UTF-8)."""
    keep = torch.zeros(vocab_size, dtype=torch.bool)
    for token_id in range(min(vocab_size, tokenizer.get_vocab_size(with_added_tokens=False))):
        text = tokenizer.decode([token_id])
        keep[token_id] = bool(text) and "\ufffd" not in text
    return keep


def _stored_bytes(config: ModelConfig, quant: str) -> int:
    total = 0
    for canonical, shape in tensor_shapes(config).items():
        numel = math.prod(shape)
        nvfp4 = quant == "nvfp4" and nvfp4_linear(canonical, shape)
        total += numel // 2 + numel // 16 if nvfp4 else numel * 2
    return total


def _progress(total: int, start: float):
    def on_flush(shard: str, written: int) -> None:
        elapsed = time.perf_counter() - start
        print(f"[ckpt] {shard}: {written / 1e9:.2f} of {total / 1e9:.2f} GB written, {elapsed:.1f} s "
              f"({written / 1e9 / max(elapsed, 1e-9):.2f} GB/s)", flush=True)
    return on_flush


def write_27b(out: str, side: str, num_layers: int, quant: str, shrink: int = 1, vocab: int = VOCAB_27B) -> float:
    """Writes the random 27B-shaped checkpoint into `out` with the tokenizer files of folder `side`; returns the
    seconds per GB written."""
    with open(os.path.join(side, "config.json"), encoding="utf-8") as f:
        raw = json.load(f)
    raw["text_config"] = text_config_27b(raw["text_config"], num_layers, vocab, shrink)
    config = ModelConfig.from_dict(raw)
    keep = text_rows(Tokenizer.from_file(os.path.join(side, "tokenizer.json")), vocab)
    total, start = _stored_bytes(config, quant), time.perf_counter()
    print(f"[ckpt] random {num_layers}-layer 27B shape{f' / {shrink}' if shrink > 1 else ''}, {quant}: "
          f"{total / 1e9:.2f} GB to {out}", flush=True)
    writer, fill, ignored = ShardWriter(out, SHARD_BYTES, _progress(total, start)), RandomFill(), []
    for canonical, shape in tensor_shapes(config).items():
        tensors = _tensors_of(fill, config, canonical, shape, quant, keep)
        if len(shape) == 2 and len(tensors) == 1:
            ignored.append(disk_name(config, canonical)[: -len(".weight")])
        for name, tensor in tensors.items():
            writer.add(name, tensor)
    writer.finish()
    if quant == "nvfp4":
        raw["quantization_config"] = quant_config("modelopt", sorted(ignored))
    for name in SIDE_FILES:
        shutil.copy2(os.path.join(side, name), os.path.join(out, name))
    _write_json(os.path.join(out, "config.json"), raw)
    elapsed = time.perf_counter() - start
    print(f"[ckpt] wrote {writer.bytes_written / 1e9:.2f} GB in {elapsed:.1f} s: {elapsed / (total / 1e9):.2f} s "
          f"per GB", flush=True)
    return elapsed / (total / 1e9)


def _write_json(path: str, obj: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)


def _prepare_folder(out: str, spec: dict) -> bool:
    """True when `out` already holds a finished checkpoint of `spec`; else empties a bench folder of another spec
    (or creates it). Refuses a non-empty folder the bench did not write."""
    spec_path = os.path.join(out, SPEC_FILE)
    if os.path.isfile(spec_path):
        with open(spec_path, encoding="utf-8") as f:
            if json.load(f) == spec:
                return True
        shutil.rmtree(out)
    elif os.path.isdir(out) and os.listdir(out):
        raise ValueError(f"{out} is not empty and holds no {SPEC_FILE}: not a folder the bench wrote; name another")
    os.makedirs(out, exist_ok=True)
    return False


def make_checkpoint(out: str, shape: str, num_layers: int = 64, quant: str = "nvfp4", shrink: int = 1,
                    vocab: int = VOCAB_27B) -> str:
    """Writes (or reuses) the checkpoint of this spec in folder `out`; returns `out`."""
    spec = {"shape": shape, "quant": quant}
    if shape == "27b":
        spec.update(layers=num_layers, shrink=shrink, vocab=vocab)
    if _prepare_folder(out, spec):
        print(f"[ckpt] reusing {out} ({spec})", flush=True)
        return out
    with tempfile.TemporaryDirectory(prefix="sparkinfer-tiny-") as side:
        write_tiny_checkpoint(side)
        if shape == "27b":
            write_27b(out, side, num_layers, quant, shrink, vocab)
        elif quant == "nvfp4":
            quantize_folder(side, out, "modelopt", lm_head=True, progress=False)
        else:
            shutil.copytree(side, out, dirs_exist_ok=True)
    _write_json(os.path.join(out, SPEC_FILE), spec)
    return out


def linear_weight_bytes(folder: str, config: ModelConfig) -> int:
    """Bytes of every Linear weight a decode step reads (LM head included, embedding not): NVFP4 ones as codes +
    block scales, the rest as bf16 (the worker's dtype on CUDA)."""
    names = SafetensorsCheckpoint(folder).weight_map
    total = 0
    for canonical, shape in tensor_shapes(config).items():
        if len(shape) != 2 or canonical == "embed_tokens.weight":
            continue
        prefix = disk_name(config, canonical)[: -len(".weight")]
        numel = math.prod(shape)
        nvfp4 = nvfp4_checkpoint.layout_of(names, prefix) in ("modelopt", "compressed-tensors")
        total += numel // 2 + numel // 16 if nvfp4 else numel * 2
    return total
