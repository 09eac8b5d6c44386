"""Unit tests (CPU): the quantize command on Qwen3.5-MoE's fused routed experts (experts.gate_up_proj [E, 2I, D],
experts.down_proj [E, D, I], as Qwen/Qwen3.5-35B-A3B ships them). Before, the 3-D tensors were not Linears to the
recipe: every expert stayed bf16 (most of the model's bytes) under a config.json saying NVFP4, and they were not
listed in `ignore` either, so vLLM read them as NVFP4 experts (NVIDIA/Model-Optimizer#2011: the same silent skip in
ModelOpt). Now each expert is quantized and written as experts.{e}.{gate,up,down}_proj, ModelOpt's export naming."""
import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from kernels.nvfp4 import checkpoint, naive, quantize
from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.checkpoint import SafetensorsCheckpoint
from worker.loader import load_model
from worker.tiny import write_tiny_checkpoint
from worker.tiny_moe import NUM_LAYERS

EXPERTS = "model.language_model.layers.{}.mlp.experts."


@pytest.fixture(scope="module")
def moe_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("moe"))
    write_tiny_checkpoint(path, arch="qwen3_5_moe")
    return path


def _close(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got - want).norm() / want.norm()).item()


@pytest.mark.parametrize("fmt", naive.FORMATS)
def test_fused_experts_are_quantized_one_expert_at_a_time(moe_path, tmp_path, fmt):
    out = str(tmp_path / "nvfp4")
    quantize.quantize_folder(moe_path, out, fmt, progress=False)
    source, ckpt = load_file(os.path.join(moe_path, "model.safetensors")), SafetensorsCheckpoint(out)
    assert not [n for n in ckpt.weight_map if n.endswith(checkpoint.FUSED_EXPERTS)]
    for layer in range(NUM_LAYERS):
        base = EXPERTS.format(layer)
        gate_up, down = source[base + "gate_up_proj"].float(), source[base + "down_proj"].float()
        inter = gate_up.shape[1] // 2
        for e in range(gate_up.shape[0]):
            want = {"gate_proj": gate_up[e, :inter], "up_proj": gate_up[e, inter:], "down_proj": down[e]}
            for proj, weight in want.items():
                prefix = f"{base}{e}.{proj}"
                assert checkpoint.layout_of(ckpt.weight_map, prefix) == fmt, prefix
                got = checkpoint.read_linear(ckpt.get, prefix, ckpt.weight_map).dequantize()
                # NVFP4's error on a random Gaussian weight is ~10%; another expert's rows would be ~140% off
                assert _close(got, weight) < 0.2, prefix
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        ignored = json.load(f)["quantization_config"]["ignore"]
    assert not [name for name in ignored if ".experts" in name]


def _logits(folder):
    model, config = load_model(folder, progress=False)
    ids = torch.randint(0, config.vocab_size, (30,), generator=torch.Generator().manual_seed(3)).tolist()
    cache = ModelCache(config, num_blocks=4, block_size=16, num_slots=1, device="cpu", dtype=torch.float32)
    with torch.no_grad():
        logits = model(ForwardBatch.from_rows([(ids, 0, 0, [1, 3], True)], 16), cache, all_logits=True)
    return model, logits


def test_quantized_fused_experts_serve_close_to_bf16(moe_path, tmp_path):
    """The loader stacks the per-expert NVFP4 Linears back into [E, 2I, D] / [E, D, I] (dequantized): each expert's
    weights are its own source weights to NVFP4's error, and the logits stay near the bf16 model's."""
    out = str(tmp_path / "nvfp4")
    quantize.quantize_folder(moe_path, out, "modelopt", progress=False)
    reference, ref = _logits(moe_path)
    model, got = _logits(out)
    for layer in range(NUM_LAYERS):
        for part in ("gate_up", "down"):
            want, have = getattr(reference.layers[layer].mlp, part), getattr(model.layers[layer].mlp, part)
            assert not torch.equal(have, want)
            assert max(_close(h, w) for h, w in zip(have, want)) < 0.2, (layer, part)
    assert 1e-4 < _close(got, ref) < 0.7


def test_fp8_fused_experts_are_refused_naming_the_tensor(moe_path, tmp_path, capsys):
    src, out = str(tmp_path / "fp8"), str(tmp_path / "out")
    os.makedirs(src)
    weights = load_file(os.path.join(moe_path, "model.safetensors"))
    name = EXPERTS.format(0) + "gate_up_proj"
    weights[name] = weights[name].to(torch.float8_e4m3fn)
    weights[name + "_scale_inv"] = torch.ones(weights[name].shape[0], 1, 1)
    save_file(weights, os.path.join(src, "model.safetensors"))
    with open(os.path.join(moe_path, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with open(os.path.join(src, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    with pytest.raises(SystemExit) as exit_info:
        quantize.main(["--src", src, "--out", out, "--format", "modelopt", "--device", "cpu"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and f"tensor {name} in model.safetensors is stored as F8_E4M3" in err
    assert not os.path.exists(out)


def test_mtp_fused_experts_stay_bf16_and_are_listed_in_ignore(moe_path, tmp_path):
    """The MTP layer (mtp.*, not served here) keeps its fused experts bf16, and config.json's ignore names their
    module, as nvidia's Qwen3.5 NVFP4 releases ignore "mtp*": a reader of the ignore list (vLLM's MTP drafter) would
    otherwise take them for NVFP4 experts."""
    src, out = str(tmp_path / "src"), str(tmp_path / "nvfp4")
    shutil.copytree(moe_path, src)
    path = os.path.join(src, "model.safetensors")
    weights = load_file(path)
    base = EXPERTS.format(0)
    mtp = {"mtp.layers.0.mlp.experts.gate_up_proj": weights[base + "gate_up_proj"].clone(),
           "mtp.layers.0.mlp.experts.down_proj": weights[base + "down_proj"].clone()}
    save_file({**weights, **mtp}, path)
    quantize.quantize_folder(src, out, "compressed-tensors", progress=False)
    ckpt = SafetensorsCheckpoint(out)
    for name, tensor in mtp.items():
        assert torch.equal(ckpt.get(name), tensor)
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        ignored = json.load(f)["quantization_config"]["ignore"]
    assert [name for name in ignored if "experts" in name] == ["mtp.layers.0.mlp.experts"]
