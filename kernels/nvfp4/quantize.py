"""Command line (offline): turn a bf16 Hugging Face folder into an NVFP4 one, ModelOpt or compressed-tensors layout.

    python -m kernels.nvfp4.quantize --src BF16_FOLDER --out OUT --format modelopt|compressed-tensors [--lm-head]

Quantizes 2-D `*_proj.weight` and `in_proj_*.weight` Linears (K % 16 == 0) like the llm-compressor / ModelOpt
recipes (the GDN in_proj_qkv / in_proj_z / Qwen3-Next in_proj_qkvz included), and the routed experts that
Qwen3.5-MoE stores fused (experts.gate_up_proj / experts.down_proj [E, ...]) one expert at a time, written as
experts.{e}.{gate,up,down}_proj as ModelOpt exports them; leaves in bf16 the
GDN small projections (in_proj_b, in_proj_a, in_proj_ba), conv1d, norms, embeddings, A_log, dt_bias, routers
(mlp.gate, shared_expert_gate), vision/MTP towers and, unless --lm-head, the LM head. Weight-only: no input scales.
"""
import argparse
import json
import os
import shutil
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from kernels.nvfp4 import naive
from kernels.nvfp4.checkpoint import FUSED_EXPERTS, split_fused_experts
from worker.checkpoint_errors import CheckpointError, check_not_lfs_pointer

SKIP_PROJ = ("in_proj_b", "in_proj_a", "in_proj_ba")
SKIP_PREFIXES = ("model.visual.", "mtp.", "visual.")
SHARD_BYTES = 4 << 30


def should_quantize(name: str, shape, lm_head: bool = False) -> bool:
    """name: tensor name ending in '.weight'; shape: its shape -> True if the recipe quantizes this Linear."""
    if not name.endswith(".weight") or len(shape) != 2 or shape[1] % naive.BLOCK or name.startswith(SKIP_PREFIXES):
        return False
    module = name[: -len(".weight")]
    last = module.rsplit(".", 1)[-1]
    if module == "lm_head" or module.endswith(".lm_head"):
        return lm_head
    return (last.endswith("_proj") or last.startswith("in_proj_")) and last not in SKIP_PROJ


def _linears(name: str, tensor: torch.Tensor) -> dict:
    """The stored tensor `name` as the tensors to write: fused 3-D experts outside the vision / MTP towers split into
    per-expert Linears (kernels.nvfp4.checkpoint.split_fused_experts), which the recipe then quantizes one by one;
    kept fused, all of Qwen3.5-MoE's experts (most of its weights) stayed bf16 in a folder that said NVFP4."""
    if name.endswith(FUSED_EXPERTS) and tensor.dim() == 3 and not name.startswith(SKIP_PREFIXES):
        return split_fused_experts(name, tensor)
    return {name: tensor}


# safetensors header dtypes of the weights the recipe reads as bf16 / fp16 / fp32 values
FLOAT_DTYPES = ("BF16", "F16", "F32")


def _read_all(src: str):
    """-> list of (name, shard file, header dtype) over every *.safetensors in src; ValueError naming a shard that is
    no safetensors file (a Git LFS pointer of a clone made without git-lfs said so: a safetensors traceback before)."""
    entries = []
    for shard in sorted(f for f in os.listdir(src) if f.endswith(".safetensors")):
        path = os.path.join(src, shard)
        try:
            check_not_lfs_pointer(path)
            with safe_open(path, framework="pt") as handle:
                entries += [(name, shard, handle.get_slice(name).get_dtype()) for name in handle.keys()]
        except Exception as exc:  # safetensors raises its own SafetensorError
            raise ValueError(f"--src {src}: {exc}" if isinstance(exc, CheckpointError) else
                             f"--src {src}: {shard} is not a readable safetensors file ({exc})") from exc
    return entries


def check_source(src: str, out: str) -> list:
    """The entries (_read_all) of `src` when it is an unquantized Hugging Face folder, else ValueError naming what is
    wrong, before anything is written: no folder, no config.json, no *.safetensors, a quantization_config (or
    ModelOpt's hf_quant_config.json) already there, or a Linear stored in other than bf16 / fp16 / fp32 (its FP8 or
    packed codes would be quantized as if they were the weights, beside the scales that no longer fit them)."""
    config_path = os.path.join(src, "config.json")
    if not os.path.isdir(src):
        raise ValueError(f"--src {src}: no such folder")
    if not os.path.isfile(config_path):
        raise ValueError(f"--src {src}: no config.json (not a Hugging Face checkpoint folder)")
    try:
        with open(config_path, encoding="utf-8") as f:
            method = (json.load(f).get("quantization_config") or {}).get("quant_method")
    except (OSError, ValueError, AttributeError) as exc:
        raise ValueError(f"--src {config_path}: not a readable config.json ({exc})") from exc
    if method or os.path.isfile(os.path.join(src, "hf_quant_config.json")):
        raise ValueError(f"--src {src}: already quantized (quant_method {method or 'modelopt'!r}); "
                         "give the bf16 checkpoint it was made from")
    if os.path.realpath(src) == os.path.realpath(out):
        raise ValueError(f"--out {out}: the same folder as --src")
    entries = _read_all(src)
    if not entries:
        raise ValueError(f"--src {src}: no *.safetensors weights in the folder")
    for name, shard, dtype in entries:
        if name.endswith((".weight",) + FUSED_EXPERTS) and dtype not in FLOAT_DTYPES:
            raise ValueError(f"--src {src}: tensor {name} in {shard} is stored as {dtype}, not bf16 / fp16 / fp32 "
                             "(already quantized?); give the bf16 checkpoint it was made from")
    return entries


def quant_config(fmt: str, ignored: list) -> dict:
    """The `quantization_config` block written into config.json for layout `fmt`."""
    weights = {"num_bits": 4, "type": "float", "group_size": naive.BLOCK, "dynamic": False}
    if fmt == "modelopt":
        # weight-only (no input_scale written): ModelOpt's W4A16_NVFP4, which vLLM serves with FP4 Marlin; its
        # "NVFP4" is W4A4 and reads an input_scale per Linear (vllm modelopt.py ModelOptNvFp4Config)
        return {"quant_method": "modelopt", "quant_algo": "W4A16_NVFP4", "group_size": naive.BLOCK, "ignore": ignored,
                "producer": {"name": "sparkinfer", "version": "1"},
                "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": None}}}
    weights.update({"strategy": "tensor_group", "symmetric": True})
    # quantization_status "compressed" (llm-compressor writes it): transformers' compressed-tensors quantizer lays out
    # the packed modules that receive weight_packed only for a compressed checkpoint (is_quantization_compressed);
    # compressed-tensors' default, "initialized", reads the folder as dense weights that are not there
    return {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "ignore": ignored,
            "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": None}}}


def _copy_side_files(src: str, out: str) -> None:
    """Tokenizer, generation config and other files of `src` into `out`; not a folder holding `out` when `out` lies
    inside `src` (--out SRC/nvfp4 nested a second copy of the output's shards in it)."""
    real_out = os.path.realpath(out)
    for entry in os.listdir(src):
        path = os.path.join(src, entry)
        holds_out = os.path.commonpath([os.path.realpath(path), real_out]) == os.path.realpath(path)
        if entry.endswith(".safetensors") or entry in ("config.json", "model.safetensors.index.json") or holds_out:
            continue
        (shutil.copytree if os.path.isdir(path) else shutil.copy2)(path, os.path.join(out, entry))


class ShardWriter:
    """Accumulates tensors and writes model-0000i.safetensors shards of about shard_bytes plus the index.
    on_flush(shard file name, bytes written so far), when given, is called after each shard is on disk."""

    def __init__(self, out: str, shard_bytes: int = SHARD_BYTES, on_flush=None):
        self.out, self.pending, self.size, self.shards, self.weight_map = out, {}, 0, [], {}
        self.shard_bytes, self.on_flush, self.bytes_written = shard_bytes, on_flush, 0

    def add(self, name: str, tensor: torch.Tensor) -> None:
        """Queues `name` -> tensor (made contiguous) for the current shard; writes the shard once it reaches
        shard_bytes."""
        self.pending[name] = tensor.contiguous()
        self.size += tensor.numel() * tensor.element_size()
        if self.size >= self.shard_bytes:
            self.flush()

    def flush(self) -> None:
        """Writes the queued tensors as the next model-0000i.safetensors (if any), records them in the weight map and
        calls on_flush."""
        if self.pending:
            shard = f"model-{len(self.shards) + 1:05d}.safetensors"
            save_file(self.pending, os.path.join(self.out, shard), metadata={"format": "pt"})
            self.weight_map.update({name: shard for name in self.pending})
            self.shards.append(shard)
            self.bytes_written += self.size
            self.pending, self.size = {}, 0
            if self.on_flush is not None:
                self.on_flush(shard, self.bytes_written)

    def finish(self) -> None:
        """Writes the last shard and model.safetensors.index.json (weight_map sorted by name)."""
        self.flush()
        index = {"metadata": {}, "weight_map": dict(sorted(self.weight_map.items()))}
        with open(os.path.join(self.out, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
            json.dump(index, f, indent=1)


def _write(writer: ShardWriter, name: str, tensor: torch.Tensor, fmt: str, lm_head: bool, device,
           ignored: list) -> str:
    """Queues tensor `name` quantized to `fmt` when the recipe quantizes it (-> "nvfp4"), else as stored, its Linear
    added to `ignored` (-> "kept")."""
    prefix = name[: -len(".weight")] if name.endswith(".weight") else name
    if should_quantize(name, tuple(tensor.shape), lm_head):
        for key, value in naive.quantize(tensor.to(device), fmt).items():
            writer.add(f"{prefix}.{key}", value.cpu())
        return "nvfp4"
    if name.endswith(".weight") and tensor.dim() >= 2:
        ignored.append(prefix)  # the GDN conv1d [C, 1, K] too: ModelOpt lists it, and vLLM builds it as a Linear
    elif name.endswith(FUSED_EXPERTS) and tensor.dim() == 3 and name.rsplit(".", 1)[0] not in ignored:
        ignored.append(name.rsplit(".", 1)[0])  # the MTP layer's experts, kept fused bf16: nvidia's releases say "mtp*"
    writer.add(name, tensor)
    return "kept"


def quantize_folder(src: str, out: str, fmt: str, lm_head: bool = False, device="cpu", progress=True) -> dict:
    """Writes the NVFP4 folder `out` from bf16 folder `src`; returns the quantization_config it wrote."""
    if fmt not in naive.FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {naive.FORMATS}")
    entries = check_source(src, out)
    if lm_head and not any(name.endswith("lm_head.weight") for name, _, _ in entries):
        # a tied head (tie_word_embeddings: Qwen3.5's small models) is the embedding, which the recipe keeps bf16
        raise ValueError(f"--lm-head: {src} stores no lm_head.weight (its head is tied to the embedding)")
    os.makedirs(out, exist_ok=True)
    writer, ignored = ShardWriter(out), []
    for i, (name, shard, _) in enumerate(entries):
        with safe_open(os.path.join(src, shard), framework="pt") as handle:
            stored = handle.get_tensor(name)
        actions = [_write(writer, part, tensor, fmt, lm_head, device, ignored)
                   for part, tensor in _linears(name, stored).items()]
        if progress:
            print(f"[{i + 1}/{len(entries)}] {name} {tuple(stored.shape)} {'/'.join(sorted(set(actions)))}",
                  file=sys.stderr, flush=True)
    writer.finish()
    with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config["quantization_config"] = quant_config(fmt, sorted(ignored))
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    _copy_side_files(src, out)
    return config["quantization_config"]


def main(argv=None) -> None:
    """Entry point `python -m kernels.nvfp4.quantize --src DIR --out DIR --format F [--lm-head] [--device D]`: a bf16
    Hugging Face folder quantized to F; a bad folder or format exits 2 with the reason."""
    # prog: the command README gives; argparse named the file (quantize.py: error: ...)
    parser = argparse.ArgumentParser(prog="python -m kernels.nvfp4.quantize", description=__doc__.splitlines()[0])
    parser.add_argument("--src", required=True, help="bf16 Hugging Face folder")
    parser.add_argument("--out", required=True, help="output folder (created)")
    parser.add_argument("--format", required=True, choices=naive.FORMATS)
    parser.add_argument("--lm-head", action="store_true", help="also quantize lm_head")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    try:
        quantize_folder(args.src, args.out, args.format, args.lm_head, args.device)
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    print(f"wrote {args.out} ({args.format})")


if __name__ == "__main__":
    main()
