"""Worker process (model loading): NVFP4 checkpoint layouts (ModelOpt, compressed-tensors) -> one in-memory weight.

Letters: N out features, K in features. The loader calls `read_linear(get, prefix, names)` per Linear; layers a
recipe left in bf16 come back as a plain tensor, FP8 layers (ModelOpt MIXED_PRECISION, compressed-tensors, or the
block-scaled `weight_scale_inv` of Qwen's own -FP8 checkpoints) as a dequantized tensor.
"""
import fnmatch
import json
import os
import re
from dataclasses import dataclass, field

import torch

from kernels.nvfp4 import naive

MODELOPT_KEYS = ("weight", "weight_scale", "weight_scale_2")
CT_KEYS = ("weight_packed", "weight_scale", "weight_global_scale")


@dataclass
class NVFP4Weight:
    """One NVFP4 Linear weight. packed u8 [N, K/2] (element 2j low nibble), scale float8_e4m3fn [N, K/16],
    gmul f32 [] (multiplier: W = e2m1 * scale * gmul), or [N] for fused shards (concat_rows).
    `cache` holds device repacks (kernels.nvfp4.ops). `released`: the checkpoint-layout codes and scales were freed
    once the kernels' repack was built (release_checkpoint_layout)."""
    packed: torch.Tensor
    scale: torch.Tensor
    gmul: torch.Tensor
    cache: dict = field(default_factory=dict, repr=False, compare=False)
    released: bool = field(default=False, compare=False)

    @property
    def shape(self) -> tuple:
        """The logical weight shape (N, K): packed holds two e2m1 codes a byte."""
        return (int(self.packed.shape[0]), int(self.packed.shape[1]) * 2)

    @property
    def device(self) -> torch.device:
        """The device of the packed codes."""
        return self.packed.device

    def to(self, device) -> "NVFP4Weight":
        """A copy of packed, scale and gmul on `device` (the repack cache not copied); RuntimeError once the checkpoint
        layout was released."""
        self._check_held("to()")
        return NVFP4Weight(self.packed.to(device), self.scale.to(device), self.gmul.to(device))

    def _check_held(self, what: str) -> None:
        if self.released:
            raise RuntimeError(f"NVFP4Weight.{what}: the checkpoint-layout codes were released after the GPU repack "
                               "(worker/layers/linear.prepack_nvfp4); only the kernels' repack remains")

    def release_checkpoint_layout(self) -> int:
        """Once the kernels read only the repack (kernels.nvfp4.ops.prepared, cached in `cache`), frees the packed
        codes and block scales: one-element stand-ins expanded to the same shape keep shape, dtype, device and
        nbytes(); dequantize() and to() raise RuntimeError from then on. Returns the bytes freed."""
        freed = self.packed.numel() + self.scale.numel()  # both one byte per element
        self.packed = torch.empty(1, dtype=self.packed.dtype, device=self.device).expand(self.packed.shape)
        self.scale = torch.empty(1, dtype=self.scale.dtype, device=self.device).expand(self.scale.shape)
        self.released = True
        return freed


    def dequantize(self, dtype=torch.float32) -> torch.Tensor:
        """-> W [N, K] in `dtype`. RuntimeError once released."""
        self._check_held("dequantize()")
        return naive.dequantize(self.packed, self.scale, self.gmul, dtype)

    def nbytes(self) -> int:
        """Bytes a kernel must read: packed codes + block scales (the global scale is negligible)."""
        return self.packed.numel() + self.scale.numel()


def concat_rows(weights) -> NVFP4Weight:
    """Fuses Linears that read the same input (q/k/v, gate/up, in_proj_qkv/z) into one NVFP4Weight along N, so one
    kernel launch serves them all; each shard keeps its own global scale exactly (gmul becomes per row). The CUDA
    kernels need every shard boundary where the scale changes at a multiple of 16 rows."""
    weights = list(weights)
    if len({w.shape[1] for w in weights}) != 1:
        raise ValueError(f"fused NVFP4 shards need one in_features, got {[w.shape for w in weights]}")
    gmuls = [w.gmul.float().reshape(-1).expand(w.shape[0]) for w in weights]
    gmul = torch.cat(gmuls)
    gmul = gmul[:1].reshape(()) if torch.equal(gmul, gmul[:1].expand_as(gmul)) else gmul
    return NVFP4Weight(torch.cat([w.packed for w in weights]), torch.cat([w.scale for w in weights]), gmul)


def from_tensors(tensors: dict) -> NVFP4Weight:
    """Tensors of one Linear, names without prefix, in either layout -> NVFP4Weight (validates shapes/dtypes)."""
    if "weight_packed" in tensors:
        packed, gmul = tensors["weight_packed"], 1.0 / tensors["weight_global_scale"].float().reshape(-1)[0]
    else:
        packed, gmul = tensors["weight"], tensors["weight_scale_2"].float().reshape(-1)[0]
    scale = tensors["weight_scale"]
    if packed.dtype != torch.uint8 or scale.dtype != torch.float8_e4m3fn:
        raise ValueError(f"NVFP4 needs u8 codes and float8_e4m3fn scales, got {packed.dtype}/{scale.dtype}")
    n, half_k = packed.shape
    if tuple(scale.shape) != (n, half_k * 2 // naive.BLOCK):
        raise ValueError(f"NVFP4 scale shape {tuple(scale.shape)} does not match codes {tuple(packed.shape)}")
    return NVFP4Weight(packed.contiguous(), scale.contiguous(), gmul.reshape(()).to(torch.float32))


# transformers' fused expert tensors of a MoE block (Qwen3.5-MoE as released, Qwen3-Next saved by transformers v5)
FUSED_EXPERTS = ("experts.gate_up_proj", "experts.down_proj")


def split_fused_experts(name: str, tensor: torch.Tensor) -> dict:
    """experts.gate_up_proj [E, 2I, D] (gate rows first) / experts.down_proj [E, D, I] -> the per-expert Linears
    experts.{e}.{gate,up,down}_proj.weight, the names Qwen3-Next's checkpoints and ModelOpt's export of Qwen3.5-MoE
    (NVIDIA/Model-Optimizer#1170, _export_qwen35_experts) store them under."""
    base = name.rsplit(".", 1)[0]
    out = {}
    for e, expert in enumerate(tensor):
        if name.endswith("down_proj"):
            out[f"{base}.{e}.down_proj.weight"] = expert.contiguous()
        else:
            gate, up = expert.chunk(2, dim=0)
            out[f"{base}.{e}.gate_proj.weight"], out[f"{base}.{e}.up_proj.weight"] = gate.contiguous(), up.contiguous()
    return out


def layout_of(names, prefix: str) -> str:
    """'compressed-tensors' | 'modelopt' | 'fp8' | 'dense' for Linear `prefix` given the checkpoint's tensor names
    (any container with `in`: a set, or a safetensors index's weight map)."""
    if f"{prefix}.weight_packed" in names:
        return "compressed-tensors"
    if f"{prefix}.weight_scale_2" in names:
        return "modelopt"
    if f"{prefix}.weight_scale" in names or f"{prefix}.weight_scale_inv" in names:
        return "fp8"
    return "dense"


def dequantize_fp8(weight: torch.Tensor, scale: torch.Tensor, block=None) -> torch.Tensor:
    """FP8 codes [N, K] times their scale -> f32 [N, K]. The scale is per tensor ([] / [1]), per row ([N, 1]) or a
    grid of blocks [ceil(N / bn), ceil(K / bk)] (quantization_config weight_block_size, or compressed-tensors'
    block_structure, [bn, bk]; without one, N and K over the grid's rows and columns, which must divide them, as
    transformers' Fp8Dequantize derives and checks it); each block's codes times its
    scale, as transformers (integrations/finegrained_fp8.py Fp8Dequantize) and vLLM's block FP8 Linear read them.
    Raises ValueError when the grid does not tile the weight."""
    codes, grid = weight.float(), scale.float()
    n, k = codes.shape
    grid = grid.reshape(1, 1) if grid.numel() == 1 else grid.reshape(-1, 1) if grid.dim() == 1 else grid
    rows, cols = grid.shape
    if not block and (n % rows or k % cols):
        raise ValueError(f"FP8 scale grid {[rows, cols]} does not divide a [{n}, {k}] weight and no "
                         "weight_block_size / block_structure names the block")
    bn, bk = block if block else (n // rows, k // cols)
    if (-(-n // bn), -(-k // bk)) != (rows, cols):
        raise ValueError(f"FP8 scale grid {[rows, cols]} does not tile a [{n}, {k}] weight in blocks {[bn, bk]}")
    full = grid.repeat_interleave(bn, dim=0)[:n].repeat_interleave(bk, dim=1)[:, :k]
    return codes * full


def read_linear(get, prefix: str, names, dtype=torch.bfloat16, block=None):
    """get(name) -> tensor; prefix e.g. 'model.layers.0.mlp.down_proj'; names: every tensor name in the checkpoint.

    -> NVFP4Weight for either NVFP4 layout, else a [N, K] tensor in `dtype` (bf16 layers as stored, FP8 layers
    dequantized with their `weight_scale` or `weight_scale_inv`, in blocks of `block` = weight_block_size when
    given: dequantize_fp8). `input_scale`/`input_global_scale`/`activation_scale` are ignored (weight-only).
    """
    layout = layout_of(names, prefix)
    if layout == "dense":
        return get(f"{prefix}.weight").to(dtype)
    if layout == "fp8":
        scale = f"{prefix}.weight_scale" if f"{prefix}.weight_scale" in names else f"{prefix}.weight_scale_inv"
        return dequantize_fp8(get(f"{prefix}.weight"), get(scale), block).to(dtype)
    keys = CT_KEYS if layout == "compressed-tensors" else MODELOPT_KEYS
    return from_tensors({key: get(f"{prefix}.{key}") for key in keys})


def to_tensors(weight: NVFP4Weight, fmt: str) -> dict:
    """NVFP4Weight -> tensors of layout `fmt` (names without prefix), the inverse of from_tensors."""
    if fmt == "modelopt":
        return {"weight": weight.packed, "weight_scale": weight.scale, "weight_scale_2": weight.gmul.reshape(())}
    if fmt == "compressed-tensors":
        return {"weight_packed": weight.packed, "weight_scale": weight.scale,
                "weight_global_scale": (1.0 / weight.gmul).reshape(1)}
    raise ValueError(f"unknown NVFP4 format {fmt!r}; expected one of {naive.FORMATS}")


@dataclass
class QuantConfig:
    """What a folder's config says: fmt 'modelopt' | 'compressed-tensors' | None (not quantized), the modules it
    leaves unquantized (`ignore`), and for ModelOpt MIXED_PRECISION the per-module algorithms."""
    fmt: str | None
    ignore: list = field(default_factory=list)
    per_module: dict = field(default_factory=dict)
    # block-scaled FP8's [rows, cols] (quant_method fp8 weight_block_size, compressed-tensors block_structure)
    fp8_block: tuple | None = None

    def algo_of(self, module: str) -> str:
        """'NVFP4' | 'W4A16_NVFP4' | 'FP8' | 'bf16' for module name `module` (e.g. 'model.layers.0.mlp.up_proj')."""
        if self.fmt is None or _matches(module, self.ignore):
            return "bf16"
        if self.per_module:
            return self.per_module.get(module, {}).get("quant_algo", "bf16")
        return "NVFP4"


def _matches(module: str, patterns) -> bool:
    """Whether module name `module` is one a recipe's ignore / exclude_modules list names. A pattern is a regex after
    `re:` (compressed-tensors' ignore: re.match, as compressed_tensors' match_name), else a shell wildcard matched
    against the whole name (ModelOpt's exclude_modules, e.g. `*linear_attn*`, `model.layers.*.mlp.gate`,
    `lm_head*`: vLLM modelopt.py is_layer_excluded calls fnmatch(prefix, pattern)), or the module's trailing dotted
    name (`lm_head`, `mlp.gate`: vLLM's is_layer_skipped). Case-sensitive, as fnmatch is on Linux."""
    for pattern in patterns:
        if pattern.startswith("re:"):
            if re.match(pattern[3:], module):
                return True
        elif module == pattern or module.endswith("." + pattern) or fnmatch.fnmatchcase(module, pattern):
            return True
    return False


def read_quant_config(folder: str) -> QuantConfig:
    """config.json `quantization_config` (either producer) or legacy hf_quant_config.json -> QuantConfig."""
    qc = {}
    cfg_path, legacy_path = os.path.join(folder, "config.json"), os.path.join(folder, "hf_quant_config.json")
    if os.path.isfile(cfg_path):
        with open(cfg_path, encoding="utf-8") as f:
            qc = json.load(f).get("quantization_config") or {}
    if not qc and os.path.isfile(legacy_path):
        with open(legacy_path, encoding="utf-8") as f:
            legacy = json.load(f).get("quantization", {})
        qc = {"quant_method": "modelopt", "quant_algo": legacy.get("quant_algo"),
              "ignore": legacy.get("exclude_modules") or [], "quantized_layers": legacy.get("quantized_layers")}
    method = qc.get("quant_method")
    if method == "fp8":
        block = qc.get("weight_block_size")
        return QuantConfig(None, fp8_block=tuple(int(b) for b in block) if block else None)
    if method == "compressed-tensors" and qc.get("format") == "float-quantized":
        blocks = [group.get("weights", {}).get("block_structure") for group in (qc.get("config_groups") or {}).values()
                  if isinstance(group, dict)]
        block = next((b for b in blocks if b), None)
        return QuantConfig(None, list(qc.get("ignore") or []), fp8_block=tuple(int(b) for b in block) if block else None)
    if method == "compressed-tensors" and qc.get("format", "nvfp4-pack-quantized") == "nvfp4-pack-quantized":
        return QuantConfig("compressed-tensors", list(qc.get("ignore") or []))
    if method == "modelopt":
        ignore = list(qc.get("ignore") or qc.get("exclude_modules") or [])
        per_module = qc.get("quantized_layers") or {} if qc.get("quant_algo") == "MIXED_PRECISION" else {}
        return QuantConfig("modelopt", ignore, dict(per_module))
    return QuantConfig(None)
