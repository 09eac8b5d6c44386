"""Model card: the quantization name comes from config.json or the legacy hf_quant_config.json (torch-free)."""
import json

import pytest

from worker.model_card import quantization_of


@pytest.mark.parametrize("qc,want", [
    (None, "bf16"),
    ({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}, "nvfp4"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {}}, "mixed"),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, "fp8"),
    ({"quant_method": "compressed-tensors", "format": "float-quantized"}, "fp8"),
    ({"quant_method": "awq"}, "awq"),
    ({"quant_method": "compressed-tensors", "format": "mixed-precision",
      "config_groups": {"group_0": {"format": "nvfp4-pack-quantized"}, "group_1": {"format": "float-quantized"}}},
     "mixed"),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"format": "nvfp4-pack-quantized"}}},
     "nvfp4"),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"format": "nvfp4-pack-quantized"},
                                                              "group_1": {"format": "float-quantized"}}}, "mixed"),
], ids=["none", "ct-nvfp4", "modelopt-nvfp4", "mixed", "modelopt-fp8", "ct-fp8", "other", "ct-mixed-precision",
        "ct-group-format-only", "ct-groups-unlike"])
def test_quantization_from_config(tmp_path, qc, want):
    raw = {"quantization_config": qc} if qc else {}
    assert quantization_of(str(tmp_path), raw) == want


def test_legacy_hf_quant_config(tmp_path):
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16}}))
    assert quantization_of(str(tmp_path), {}) == "nvfp4"
