"""Unit tests (CPU): quantized checkpoints whose Linears carry what the loader does not apply are refused at load,
naming the format or the tensor, where they loaded silently wrong or failed on a tensor they never had: compressed-
tensors "pack-quantized" (INT4 W4A16 in int32 words, e.g. the AWQ-4bit Qwen3-Next exports of vLLM issue 25797:
MissingTensorError on a weight_global_scale before), ModelOpt AWQ's `pre_quant_scale` (NVFP4_AWQ: served as plain
NVFP4 before), compressed-tensors `weight_zero_point` (asymmetric INT8: dequantized as symmetric before) and MX
E8M0 scales (ModelOpt MXFP8: every weight times its exponent byte before)."""
import json
import os

import pytest
import torch
from safetensors.torch import load_file, save_file

from kernels.nvfp4 import quantize
from worker.loader import UnsupportedModelError, load_model
from worker.tiny import write_tiny_checkpoint

UP = "model.language_model.layers.0.mlp.up_proj"


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tiny"))
    write_tiny_checkpoint(path)
    return path


def _edit(folder: str, change_weights, quantization_config: dict) -> None:
    """change_weights(tensors) on the shard holding UP (the index, where there is one, follows), and the config's
    quantization_config replaced."""
    index_path = os.path.join(folder, "model.safetensors.index.json")
    index = json.load(open(index_path, encoding="utf-8")) if os.path.isfile(index_path) else None
    for shard in sorted(set(index["weight_map"].values())) if index else ["model.safetensors"]:
        weights = load_file(os.path.join(folder, shard))
        if UP + ".weight" in weights:
            change_weights(weights)
            save_file(weights, os.path.join(folder, shard))
            if index:
                index["weight_map"] = {n: s for n, s in index["weight_map"].items() if s != shard}
                index["weight_map"].update({n: shard for n in weights})
    if index:
        with open(index_path, "w", encoding="utf-8") as f:
            json.dump(index, f)
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config["quantization_config"] = quantization_config
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)


def _copy(tiny_path, tmp_path) -> str:
    folder = str(tmp_path / "copy")
    os.makedirs(folder)
    for name in os.listdir(tiny_path):
        with open(os.path.join(tiny_path, name), "rb") as src, open(os.path.join(folder, name), "wb") as dst:
            dst.write(src.read())
    return folder


@pytest.mark.parametrize("fmt", ["pack-quantized", "marlin-24"])
def test_compressed_tensors_format_not_read_is_refused_by_name(tiny_path, tmp_path, fmt):
    folder = _copy(tiny_path, tmp_path)

    def pack(weights):
        rows, cols = weights.pop(UP + ".weight").shape
        weights[UP + ".weight_packed"] = torch.zeros(rows, cols // 8, dtype=torch.int32)
        weights[UP + ".weight_scale"] = torch.ones(rows, cols // 32, dtype=torch.bfloat16)
        weights[UP + ".weight_shape"] = torch.tensor([rows, cols])

    group = {"targets": ["Linear"], "format": fmt,
             "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True}}
    _edit(folder, pack, {"quant_method": "compressed-tensors", "format": "mixed-precision",
                         "config_groups": {"group_0": group}})
    with pytest.raises(UnsupportedModelError, match=f"compressed-tensors format '{fmt}'"):
        load_model(folder, progress=False)


def test_modelopt_awq_pre_quant_scale_is_refused_naming_the_tensor(tiny_path, tmp_path):
    folder = str(tmp_path / "nvfp4")
    quantize.quantize_folder(tiny_path, folder, "modelopt", progress=False)
    load_model(folder, progress=False)

    def add_scale(weights):
        weights[UP + ".pre_quant_scale"] = torch.full((weights[UP + ".weight"].shape[1] * 2,), 2.0,
                                                      dtype=torch.bfloat16)

    _edit(folder, add_scale, {"quant_method": "modelopt", "quant_algo": "NVFP4_AWQ"})
    with pytest.raises(UnsupportedModelError, match=rf"tensor {UP}\.pre_quant_scale: ModelOpt AWQ"):
        load_model(folder, progress=False)


@pytest.mark.parametrize("zero", [3, 0], ids=["asymmetric", "symmetric-zeros"])
def test_asymmetric_int8_zero_points_are_refused_naming_the_tensor(tiny_path, tmp_path, zero):
    """Nonzero zero points are refused; all-zero ones (older compressed-tensors wrote them for symmetric weights too)
    are exact to ignore and load."""
    folder = _copy(tiny_path, tmp_path)

    def int8(weights):
        weight = weights.pop(UP + ".weight").float()
        scale = weight.abs().amax(dim=1, keepdim=True) / 127
        weights[UP + ".weight"] = (weight / scale).round().to(torch.int8)
        weights[UP + ".weight_scale"] = scale.to(torch.bfloat16)
        weights[UP + ".weight_zero_point"] = torch.full_like(scale, zero, dtype=torch.int8)

    _edit(folder, int8, {"quant_method": "compressed-tensors", "format": "int-quantized"})
    if zero:
        with pytest.raises(UnsupportedModelError, match=rf"tensor {UP}\.weight_zero_point: compressed-tensors asymm"):
            load_model(folder, progress=False)
    else:
        model, _ = load_model(folder, progress=False)
        want = load_file(os.path.join(tiny_path, "model.safetensors"))[UP + ".weight"].float()
        got = model.layers[0].mlp.up_proj.weight
        assert ((got - want).norm() / want.norm()).item() < 0.01


@pytest.mark.parametrize("algo", ["MXFP8", "MXFP4"])
def test_mx_e8m0_scales_are_refused_naming_the_tensor(tiny_path, tmp_path, algo):
    """ModelOpt MXFP8 / MXFP4: FP8 codes (or packed FP4 bytes) with uint8 E8M0 exponents per 32 columns as
    weight_scale. Before: MXFP8 loaded with every weight times its exponent byte (127 for a scale of 1)."""
    folder = _copy(tiny_path, tmp_path)

    def mx(weights):
        weight = weights.pop(UP + ".weight").float()
        rows, cols = weight.shape
        codes = weight.to(torch.float8_e4m3fn) if algo == "MXFP8" else torch.zeros(rows, cols // 2, dtype=torch.uint8)
        weights[UP + ".weight"] = codes
        weights[UP + ".weight_scale"] = torch.full((rows, cols // 32), 127, dtype=torch.uint8)

    _edit(folder, mx, {"quant_method": "modelopt", "quant_algo": algo})
    with pytest.raises(UnsupportedModelError, match=rf"tensor {UP}\.weight_scale is stored as U8"):
        load_model(folder, progress=False)


def _rotation(location: str) -> dict:
    return {"type": "hadamard", "apply": [{"targets": ["Linear"], "location": "weight_input", "inverse": True},
                                          {"targets": ["Linear"], "location": location}]}


@pytest.mark.parametrize("transforms, refused", [
    ({"u": _rotation("input"), "v": _rotation("weight_output")}, "u.input"),
    ({"R1": _rotation("weight_output")}, None),
    ({}, None),
], ids=["quip-online", "spinquant-r1-folded", "none"])
def test_online_rotations_of_transform_config_are_refused(tiny_path, tmp_path, transforms, refused):
    """compressed-tensors' transform_config (llm-compressor QuIPModifier / SpinQuantModifier): rotations at
    weight_input / weight_output are folded into the stored weights and load; one at any other location rotates the
    activations at run time (TransformLocation.is_online), which the loader does not do, and was served silently
    unrotated before."""
    folder = str(tmp_path / "nvfp4")
    quantize.quantize_folder(tiny_path, folder, "compressed-tensors", progress=False)
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        quant = json.load(f)["quantization_config"]
    _edit(folder, lambda weights: None, {**quant, "transform_config": {"config_groups": transforms}})
    if refused:
        with pytest.raises(UnsupportedModelError, match=rf"transform_config rotates activations at run time "
                                                        rf"\({refused}: QuIP"):
            load_model(folder, progress=False)
    else:
        load_model(folder, progress=False)


def test_mlx_affine_layout_is_refused_naming_the_tensor(tiny_path, tmp_path):
    """An mlx-community conversion (mlx_lm: uint32 words of 4-bit codes, bf16 `scales` and `biases` per 64 columns,
    config.json `quantization` {group_size, bits}) failed on a shape ([N, K/8] against [N, K]) that did not say why."""
    folder = _copy(tiny_path, tmp_path)

    def mlx(weights):
        rows, cols = weights.pop(UP + ".weight").shape
        weights[UP + ".weight"] = torch.zeros(rows, cols // 8, dtype=torch.int32)
        weights[UP + ".scales"] = torch.ones(rows, cols // 64, dtype=torch.bfloat16)
        weights[UP + ".biases"] = torch.zeros(rows, cols // 64, dtype=torch.bfloat16)

    _edit(folder, mlx, None)
    with pytest.raises(UnsupportedModelError, match=rf"tensor {UP}\.scales: MLX's quantized layout"):
        load_model(folder, progress=False)


@pytest.mark.parametrize("sparsity, refused", [({"format": "sparse-24-bitmask", "sparsity_structure": "2:4"}, True),
                                               ({"format": "dense", "sparsity_structure": "2:4"}, False),
                                               ({}, False)], ids=["bitmask", "dense", "none"])
def test_sparse_compressed_weights_are_refused_by_format(tiny_path, tmp_path, sparsity, refused):
    """compressed-tensors' sparsity_config (llm-compressor 2:4 sparse exports): weights stored as values and bitmasks
    (sparse-24-bitmask) are refused naming the format, where the loader named a missing .weight; a 2:4 sparse model
    stored dense loads."""
    folder = str(tmp_path / "nvfp4")
    quantize.quantize_folder(tiny_path, folder, "compressed-tensors", progress=False)
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        quant = json.load(f)["quantization_config"]
    _edit(folder, lambda weights: None, {**quant, "sparsity_config": sparsity})
    if refused:
        with pytest.raises(UnsupportedModelError, match="compressed-tensors format 'sparse-24-bitmask'"):
            load_model(folder, progress=False)
    else:
        load_model(folder, progress=False)
