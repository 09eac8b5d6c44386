"""Tiny Qwen3.5 model with NVFP4 weights (CPU): the quantize command's output, read layer by layer with
kernels.nvfp4.checkpoint.read_linear into worker Linear layers, against the bf16 checkpoint's logits."""
import pytest
import torch

from kernels.nvfp4 import checkpoint, naive, quantize
from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.checkpoint import SafetensorsCheckpoint
from worker.config import ModelConfig
from worker.loader import load_model
from worker.models.qwen3_5 import Qwen3_5ForCausalLM
from worker.models.qwen3_5_weights import disk_name, tensor_shapes
from worker.tiny import write_tiny_checkpoint

# NVFP4 (E2M1 + e4m3 per 16) has ~9% RMS weight error per quantized Linear. The tiny model's random weights amplify
# it: with the 50 Linears the recipe quantizes (in_proj_qkv / in_proj_z included since 2026-11-30) the logits error is
# 0.565 relative (Frobenius, 30 tokens), while 9%-RMS Gaussian noise on the same Linears gives 0.56-0.62 (3 seeds) and
# swapped nibbles 1.31 (on the earlier 34 Linears). Stated bound 0.7: above the equivalent noise, below a broken code
LOGITS_REL_TOL = 0.7


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tiny"))
    write_tiny_checkpoint(path)
    return path


def _load_nvfp4(folder: str, dense: bool = False):
    """Like worker.loader.load_model (float32), but quantized Linears stay NVFP4Weight (or, dense=True, are
    dequantized to f32 tensors)."""
    config = ModelConfig.from_file(folder)
    ckpt = SafetensorsCheckpoint(folder)
    tensors, num_nvfp4 = {}, 0
    for canonical in tensor_shapes(config):
        name = disk_name(config, canonical)
        prefix = name[: -len(".weight")] if name.endswith(".weight") else None
        if prefix and checkpoint.layout_of(ckpt.weight_map, prefix) in naive.FORMATS:
            weight = checkpoint.read_linear(ckpt.get, prefix, ckpt.weight_map)
            tensors[canonical] = weight.dequantize() if dense else weight
            num_nvfp4 += 1
        else:
            tensors[canonical] = ckpt.get(name).to(torch.float32)
    return Qwen3_5ForCausalLM(config, tensors).eval(), config, num_nvfp4


def _logits(model, config):
    ids = torch.randint(0, config.vocab_size, (30,), generator=torch.Generator().manual_seed(3)).tolist()
    cache = ModelCache(config, num_blocks=4, block_size=16, num_slots=1, device="cpu", dtype=torch.float32)
    with torch.no_grad():
        return model(ForwardBatch.from_rows([(ids, 0, 0, [1, 3], True)], 16), cache, all_logits=True)


@pytest.mark.parametrize("fmt", naive.FORMATS)
def test_quantized_tiny_model_logits_stay_close_to_bf16(tiny_path, tmp_path, fmt):
    out = str(tmp_path / "nvfp4")
    quantize.quantize_folder(tiny_path, out, fmt, lm_head=False, progress=False)
    reference, config = load_model(tiny_path, progress=False)
    ref = _logits(reference, config)
    model, _, num_nvfp4 = _load_nvfp4(out)
    # every layer's attention/GDN/MLP projections except in_proj_b/a (recipe leaves them bf16)
    assert num_nvfp4 == sum(1 for n in tensor_shapes(config) if quantize.should_quantize(n, (8, 16)))
    got = _logits(model, config)
    rel = ((got - ref).norm() / ref.norm()).item()
    assert 1e-4 < rel < LOGITS_REL_TOL, rel
    # the NVFP4 Linear (naive CPU path) computes exactly what the dequantized dense weights do
    dense, _, _ = _load_nvfp4(out, dense=True)
    torch.testing.assert_close(got, _logits(dense, config), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fmt", naive.FORMATS)
def test_worker_loader_serves_quantized_checkpoints(tiny_path, tmp_path, fmt):
    """worker.loader.load_model (what the worker runs) keeps NVFP4 Linears 4-bit and computes what the
    layer-by-layer reader above computes; the model card names the quantization."""
    out = str(tmp_path / "nvfp4")
    quantize.quantize_folder(tiny_path, out, fmt, lm_head=True, progress=False)
    model, config = load_model(out, progress=False)
    layers = [m for m in model.modules() if getattr(m, "nvfp4", None) is not None]
    _, _, num_nvfp4 = _load_nvfp4(out)
    assert len(layers) == num_nvfp4 and model.lm_head.nvfp4 is not None
    reference, _, _ = _load_nvfp4(out)
    torch.testing.assert_close(_logits(model, config), _logits(reference, config), rtol=1e-5, atol=1e-5)
    from worker.model_card import load_model_card
    assert load_model_card(out)["quantization"] in ("nvfp4", "mixed")


@pytest.mark.parametrize("fmt", naive.FORMATS)
def test_quantized_qwen3_next_fused_projections_load_split(tmp_path, fmt):
    """Qwen3-Next stores linear_attn.in_proj_qkvz / in_proj_ba fused; the recipe quantizes in_proj_qkvz and keeps
    in_proj_ba bf16 (and quantizes the experts). The loader splits the NVFP4 rows (codes and block scales) as it splits a dense tensor, keeping
    the global scale: each split weight dequantizes to exactly the rows split_fused_qkvz takes from the dequantized
    fused one (before: TensorShapeError on the u8 codes, or MissingTensorError for compressed-tensors)."""
    from worker.layers.gdn import split_fused_qkvz

    src, out = str(tmp_path / "next"), str(tmp_path / "nvfp4")
    write_tiny_checkpoint(src, arch="qwen3_next")
    quantize.quantize_folder(src, out, fmt, lm_head=False, progress=False)
    model, config = load_model(out, progress=False)
    ckpt = SafetensorsCheckpoint(out)
    prefix = disk_name(config, "layers.0.linear_attn.in_proj_qkvz.weight")[: -len(".weight")]
    assert checkpoint.layout_of(ckpt.weight_map, prefix) == fmt
    qkvz = checkpoint.read_linear(ckpt.get, prefix, ckpt.weight_map).dequantize()
    ba = ckpt.get(prefix.replace("in_proj_qkvz", "in_proj_ba") + ".weight").float()
    want = split_fused_qkvz(qkvz, ba, config.linear_num_key_heads, config.linear_key_head_dim,
                            config.linear_value_head_dim, config.linear_num_value_heads)
    mixer = model.layers[0].mixer
    for name in ("in_proj_qkv", "in_proj_z"):
        assert torch.equal(getattr(mixer, name).nvfp4.dequantize(), want[name]), name
    for name in ("in_proj_b", "in_proj_a"):
        assert getattr(mixer, name).nvfp4 is None and torch.equal(getattr(mixer, name).weight, want[name]), name
    # the recipe quantizes the MoE experts too: the loader dequantizes them into the dense expert stack
    expert = prefix.replace("linear_attn.in_proj_qkvz", "mlp.experts.0.gate_proj")
    assert checkpoint.layout_of(ckpt.weight_map, expert) == fmt
    gate = checkpoint.read_linear(ckpt.get, expert, ckpt.weight_map).dequantize()
    assert torch.equal(model.layers[0].mlp.gate_up[0, : gate.shape[0]], gate)
    assert torch.isfinite(_logits(model, config)).all()
