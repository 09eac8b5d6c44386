"""NVFP4 plain-torch reference: hand-computed values, both checkpoint layouts, the quantize command (CPU)."""
import json
import os

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from kernels.nvfp4 import checkpoint, naive, quantize

ALL_CODES = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]


def _e4m3(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32).to(torch.float8_e4m3fn)


def test_every_code_dequantizes_to_its_value():
    codes = torch.arange(16, dtype=torch.uint8).reshape(1, 16)
    packed = naive.pack_codes(codes)
    assert packed.tolist() == [[0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE]]  # element 2j in the low nibble
    w = naive.dequantize(packed, _e4m3([[1.0]]), 1.0)
    assert w.tolist() == [ALL_CODES]
    assert torch.signbit(w[0, 8])  # code 8 is -0.0


def test_scales_multiply_exactly():
    codes = torch.arange(16, dtype=torch.uint8).repeat(1, 2).reshape(1, 32)
    scale = _e4m3([[448.0, 2.0 ** -9]])  # largest e4m3 and its smallest subnormal
    w = naive.dequantize(naive.pack_codes(codes), scale, 0.5)
    expected = torch.tensor(ALL_CODES + ALL_CODES) * torch.tensor([448.0 * 0.5] * 16 + [2.0 ** -10] * 16)
    assert torch.equal(w, expected.reshape(1, 32))


@pytest.mark.parametrize("value,code", [
    (0.25, 0), (0.2500001, 1), (0.75, 2), (0.7499999, 1), (1.25, 2), (1.75, 4), (2.5, 4), (2.5000002, 5),
    (3.5, 6), (5.0, 6), (5.0000005, 7), (6.0, 7), (100.0, 7), (-0.75, 10), (-5.0, 14), (-0.1, 8), (0.0, 0)],
    ids=lambda v: str(v))
def test_round_to_nearest_even_on_the_bounds(value, code):
    assert naive.round_to_e2m1(torch.tensor([value])).item() == code


def test_modelopt_hand_computed_row():
    # amax 12 -> s2 = 12/2688; block 0: scale 448, W/(448 s2) = W/2 -> codes 6, -3, 0.5; block 1 amax 3 -> scale 112,
    # W/(112 s2) = 2W -> 6, -3; zero block -> scale 1, codes 0
    row = torch.tensor([12.0, -6.0, 1.0] + [0.0] * 13 + [3.0, -1.5] + [0.0] * 14 + [0.0] * 16).reshape(1, 48)
    q = naive.quantize_modelopt(row)
    assert q["weight_scale_2"].item() == pytest.approx(12.0 / 2688.0, rel=1e-7)
    assert q["weight_scale"].float().tolist() == [[448.0, 112.0, 1.0]]
    codes = naive.unpack_codes(q["weight"])[0]
    assert codes[:3].tolist() == [7, 13, 1] and codes[16:18].tolist() == [7, 13] and codes[32:].sum() == 0
    w = naive.dequantize(q["weight"], q["weight_scale"], q["weight_scale_2"])
    assert torch.allclose(w, row, rtol=1e-6, atol=0)


def test_compressed_tensors_hand_computed_row():
    row = torch.tensor([12.0, -6.0, 1.0] + [0.0] * 13 + [0.0] * 16).reshape(1, 32)
    q = naive.quantize_compressed_tensors(row)
    assert q["weight_global_scale"].item() == pytest.approx(2688.0 / 12.0, rel=1e-7)
    assert q["weight_scale"].float().tolist() == [[448.0, 0.125]]  # zero block -> 0.125
    w = naive.dequantize(q["weight_packed"], q["weight_scale"], 1.0 / q["weight_global_scale"])
    assert torch.allclose(w, row, rtol=1e-6, atol=0)


def test_round_trip_error_on_gaussian_weights():
    torch.manual_seed(0)
    w = torch.randn(64, 256)
    for fmt in naive.FORMATS:
        weight = checkpoint.from_tensors(naive.quantize(w, fmt))
        rel = (weight.dequantize() - w).norm() / w.norm()
        assert 0.02 < rel < 0.12, (fmt, rel)  # E2M1 with 16-wide e4m3 scales: ~9% RMS on Gaussians


def test_both_layouts_load_identical_tensors():
    torch.manual_seed(1)
    ref = checkpoint.from_tensors(naive.quantize(torch.randn(32, 64), "modelopt"))
    ref.gmul = torch.tensor(2.0 ** -7)  # exactly invertible, so the divisor form round-trips bit for bit
    loaded = []
    for fmt in naive.FORMATS:
        tensors = {f"layer.{k}": v for k, v in checkpoint.to_tensors(ref, fmt).items()}
        assert checkpoint.layout_of(tensors, "layer") == fmt
        loaded.append(checkpoint.read_linear(tensors.__getitem__, "layer", tensors))
    a, b = loaded
    assert torch.equal(a.packed, b.packed) and torch.equal(a.scale.view(torch.uint8), b.scale.view(torch.uint8))
    assert a.gmul.item() == b.gmul.item() == 2.0 ** -7
    assert torch.equal(a.dequantize(), b.dequantize())


def test_the_two_producers_agree():
    torch.manual_seed(2)
    w = torch.randn(128, 512) * 0.02
    mo = checkpoint.from_tensors(naive.quantize(w, "modelopt")).dequantize()
    ct = checkpoint.from_tensors(naive.quantize(w, "compressed-tensors")).dequantize()
    assert (mo - ct).abs().max() <= 1e-6 * w.abs().max()


def test_dense_and_fp8_layers_stay_dense():
    w = torch.randn(8, 16)
    dense = {"a.weight": w.to(torch.bfloat16)}
    assert torch.equal(checkpoint.read_linear(dense.__getitem__, "a", dense), w.to(torch.bfloat16))
    fp8 = {"a.weight": w.to(torch.float8_e4m3fn), "a.weight_scale": torch.tensor(0.5)}
    out = checkpoint.read_linear(fp8.__getitem__, "a", fp8, dtype=torch.float32)
    assert torch.equal(out, w.to(torch.float8_e4m3fn).float() * 0.5)


def test_naive_linear_matches_dequantized_matmul():
    torch.manual_seed(3)
    q = naive.quantize(torch.randn(24, 48), "modelopt")
    x = torch.randn(5, 48)
    y = naive.linear(x, q["weight"], q["weight_scale"], q["weight_scale_2"])
    w = naive.dequantize(q["weight"], q["weight_scale"], q["weight_scale_2"])
    assert torch.allclose(y, x @ w.t(), rtol=1e-5, atol=1e-5)


def _write_folder(path) -> dict:
    torch.manual_seed(4)
    names = {
        "model.language_model.layers.0.mlp.gate_proj.weight": (96, 64),
        "model.language_model.layers.0.mlp.down_proj.weight": (64, 96),
        "model.language_model.layers.0.linear_attn.in_proj_qkv.weight": (80, 64),
        "model.language_model.layers.0.linear_attn.in_proj_z.weight": (48, 64),
        "model.language_model.layers.0.linear_attn.in_proj_b.weight": (4, 64),
        "model.language_model.layers.0.linear_attn.in_proj_a.weight": (4, 64),
        "model.language_model.layers.0.linear_attn.conv1d.weight": (80, 1, 4),
        "model.language_model.layers.0.linear_attn.A_log": (4,),
        "model.language_model.layers.0.input_layernorm.weight": (64,),
        "model.language_model.embed_tokens.weight": (50, 64),
        "lm_head.weight": (50, 64),
    }
    tensors = {n: (torch.randn(s) * 0.05).to(torch.bfloat16) for n, s in names.items()}
    save_file(tensors, os.path.join(path, "model.safetensors"))
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"model_type": "qwen3_5", "text_config": {"hidden_size": 64}}, f)
    with open(os.path.join(path, "tokenizer.json"), "w") as f:
        f.write("{}")
    return tensors


def _read_folder(path) -> dict:
    out = {}
    for shard in (f for f in os.listdir(path) if f.endswith(".safetensors")):
        with safe_open(os.path.join(path, shard), framework="pt") as handle:
            out.update({n: handle.get_tensor(n) for n in handle.keys()})
    return out


@pytest.mark.parametrize("fmt", naive.FORMATS)
@pytest.mark.parametrize("lm_head", [False, True], ids=["head-bf16", "head-nvfp4"])
def test_quantize_command_output_loads(tmp_path, fmt, lm_head):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    original = _write_folder(src)
    argv = ["--src", str(src), "--out", str(out), "--format", fmt, "--device", "cpu"] + (["--lm-head"] * lm_head)
    quantize.main(argv)
    assert (out / "tokenizer.json").is_file() and (out / "model.safetensors.index.json").is_file()
    qc = checkpoint.read_quant_config(str(out))
    assert qc.fmt == fmt
    stored = _read_folder(out)
    # the recipes' choice: every projection but the GDN gates in_proj_b / in_proj_a (in_proj_qkv / in_proj_z too,
    # whose names do not end in "_proj": an earlier should_quantize left those 60% of a GDN layer's weights in bf16)
    quantized = {f"model.language_model.layers.0.{n}.weight" for n in
                 ("mlp.gate_proj", "mlp.down_proj", "linear_attn.in_proj_qkv", "linear_attn.in_proj_z")}
    quantized |= {"lm_head.weight"} if lm_head else set()
    for name, tensor in original.items():
        prefix = name.rsplit(".", 1)[0]
        got = checkpoint.read_linear(stored.__getitem__, prefix, stored) if name.endswith(".weight") else stored[name]
        if name in quantized:
            assert isinstance(got, checkpoint.NVFP4Weight) and qc.algo_of(prefix) == "NVFP4"
            rel = (got.dequantize() - tensor.float()).norm() / tensor.float().norm()
            assert rel < 0.12, (name, rel)
        else:
            assert torch.equal(got, tensor), name
            assert tensor.dim() != 2 or qc.algo_of(prefix) == "bf16"


def test_mixed_precision_config(tmp_path):
    cfg = {"quantization_config": {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
                                   "quantized_layers": {"m.layers.0.mlp.up_proj": {"quant_algo": "NVFP4"},
                                                        "m.layers.0.linear_attn.out_proj": {"quant_algo": "FP8"}}}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    qc = checkpoint.read_quant_config(str(tmp_path))
    assert qc.algo_of("m.layers.0.mlp.up_proj") == "NVFP4"
    assert qc.algo_of("m.layers.0.linear_attn.out_proj") == "FP8"
    assert qc.algo_of("lm_head") == "bf16"


def test_legacy_hf_quant_config(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "exclude_modules": ["lm_head"]}}))
    qc = checkpoint.read_quant_config(str(tmp_path))
    assert qc.fmt == "modelopt" and qc.algo_of("lm_head") == "bf16" and qc.algo_of("x.q_proj") == "NVFP4"
