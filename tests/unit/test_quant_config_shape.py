"""Unit tests (CPU): a quantization_config of JSON types the loader cannot read is refused in one line naming the field
(UnsupportedModelError, the CheckpointError that `make run`'s preflight and the worker print), before any tensor is
read. Read as it was, "fp8" failed with AttributeError ('str' object has no attribute 'get') in the preflight, a
weight_block_size of "x" with int()'s ValueError and an ignore of 5 with TypeError in the worker: tracebacks, and an
ignore of "lm_head" was read as its letters. Shapes the producers write (Qwen's -FP8, compressed-tensors, ModelOpt's
mixed precision) still load."""
import json
import os
import shutil

import pytest

from deploy.preflight import model_problem
from worker.checkpoint_errors import UnsupportedModelError
from worker.config import ModelConfig
from worker.loader import load_model
from worker.tiny import write_tiny_checkpoint

CT = "compressed-tensors"
BAD = [("not-an-object", "fp8", "quantization_config must be an object, got 'fp8'"),
       ("a-list", [], "quantization_config must be an object"),
       ("block-a-string", {"quant_method": "fp8", "weight_block_size": "x"}, "quantization_config.weight_block_size"),
       ("block-zero", {"quant_method": "fp8", "weight_block_size": [0, 0]}, "quantization_config.weight_block_size"),
       ("block-one-side", {"quant_method": "fp8", "weight_block_size": [128]}, "two positive integers"),
       ("ignore-an-int", {"quant_method": CT, "ignore": 5}, "quantization_config.ignore must be a list of module"),
       ("ignore-a-string", {"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": "lm_head"},
        "quantization_config.ignore"),
       ("exclude-modules-ints", {"quant_method": "modelopt", "exclude_modules": [1]}, "quantization_config.exclude_"),
       ("groups-a-list", {"quant_method": CT, "config_groups": []}, "quantization_config.config_groups"),
       ("group-weights-a-string", {"quant_method": CT, "format": "float-quantized",
                                   "config_groups": {"group_0": {"weights": "x"}}},
        "quantization_config.config_groups.group_0.weights must be an object"),
       ("block-structure-a-string", {"quant_method": CT, "format": "float-quantized",
                                     "config_groups": {"group_0": {"weights": {"block_structure": "128x128"}}}},
        "config_groups.group_0.weights.block_structure"),
       ("quantized-layers-a-list", {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
                                    "quantized_layers": ["a"]}, "quantization_config.quantized_layers")]
GOOD = [("absent", None), ("empty", {}),
        ("qwen-fp8", {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                      "weight_block_size": [128, 128]}),
        ("ct-float-block", {"quant_method": CT, "format": "float-quantized", "ignore": ["lm_head"], "config_groups": {
            "group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "block",
                                                           "block_structure": [128, 128]},
                        "input_activations": None, "format": "float-quantized"}}, "kv_cache_scheme": None}),
        ("modelopt-mixed", {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "ignore": None,
                            "quantized_layers": {"model.layers.0.mlp.up_proj": {"quant_algo": "FP8"}}})]


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tiny"))
    write_tiny_checkpoint(path)
    return path


def _with(tiny_path, tmp_path, quant) -> str:
    folder = str(tmp_path / "copy")
    shutil.copytree(tiny_path, folder)
    path = os.path.join(folder, "config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    if quant is None:
        config.pop("quantization_config", None)
    else:
        config["quantization_config"] = quant
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return folder


@pytest.mark.parametrize("quant, says", [row[1:] for row in BAD], ids=[row[0] for row in BAD])
def test_a_malformed_quantization_config_is_refused_naming_the_field(tiny_path, tmp_path, quant, says):
    folder = _with(tiny_path, tmp_path, quant)
    with pytest.raises(UnsupportedModelError, match="unsupported model: .*") as refused:
        load_model(folder, progress=False)
    assert says in str(refused.value) and "config.json" in str(refused.value)
    problem = model_problem(folder, "/")
    assert problem is not None and says in problem and "\n" not in problem


@pytest.mark.parametrize("quant", [row[1] for row in GOOD], ids=[row[0] for row in GOOD])
def test_the_shapes_producers_write_are_read(tiny_path, tmp_path, quant):
    folder = _with(tiny_path, tmp_path, quant)
    assert ModelConfig.from_file(folder).quant_method == ((quant or {}).get("quant_method") or "")


@pytest.mark.parametrize("legacy, says", [
    ({"quantization": "NVFP4"}, "quantization must be an object, got 'NVFP4'"),
    ({"quantization": {"quant_algo": "NVFP4", "exclude_modules": "lm_head"}},
     "quantization.exclude_modules must be a list of module names, got 'lm_head'"),
], ids=["quantization-a-string", "exclude-modules-a-string"])
def test_a_malformed_legacy_hf_quant_config_is_refused_naming_the_field(tiny_path, tmp_path, legacy, says):
    """ModelOpt's legacy hf_quant_config.json (read when config.json has no quantization_config) is held to the same
    JSON types: a string "quantization" died with AttributeError in make run's preflight and in the loader."""
    folder = _with(tiny_path, tmp_path, None)
    path = os.path.join(folder, "hf_quant_config.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"producer": {"name": "modelopt"}, **legacy}, f)
    with pytest.raises(UnsupportedModelError) as refused:
        load_model(folder, progress=False)
    assert str(refused.value) == f"{path}: unsupported model: {says}"
    assert model_problem(folder, "/") == f"cannot serve MODEL={folder}: {path}: unsupported model: {says} (MODEL is " \
                                         "a Hugging Face checkpoint folder: config.json, tokenizer.json, *.safetensors)"
