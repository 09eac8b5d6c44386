"""Unit tests (CPU): the quantize command (kernels/nvfp4/quantize.py) on folders it cannot turn into NVFP4: a bad
path, no config.json, an already quantized folder (its own output, FP8 codes): one line naming what is wrong, exit
status 2, and nothing written; before, a traceback after a half-written output folder, or an output of codes
quantized as if they were weights (the loader then failed on a bare tensor name)."""
import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from kernels.nvfp4 import quantize
from worker import tiny
from worker.loader import load_model
from worker.model_card import load_model_card
from worker.tiny import write_tiny_checkpoint


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tiny"))
    write_tiny_checkpoint(path)
    return path


def _run(capsys, src, out):
    with pytest.raises(SystemExit) as exit_info:
        quantize.main(["--src", src, "--out", out, "--format", "modelopt", "--device", "cpu"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not os.path.exists(out)
    return err


def test_missing_folder_and_folder_without_config(tmp_path, capsys):
    assert "--src /no/such/folder: no such folder" in _run(capsys, "/no/such/folder", str(tmp_path / "a"))
    (tmp_path / "empty").mkdir()
    assert "no config.json" in _run(capsys, str(tmp_path / "empty"), str(tmp_path / "b"))


def test_folder_without_weights(tmp_path, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.json").write_text(json.dumps({"model_type": "qwen3_5_text"}))
    assert "no *.safetensors weights" in _run(capsys, str(tmp_path / "src"), str(tmp_path / "out"))


def test_its_own_nvfp4_output_is_refused_and_the_output_still_loads(tiny_path, tmp_path, capsys):
    first = str(tmp_path / "nvfp4")
    quantize.main(["--src", tiny_path, "--out", first, "--format", "compressed-tensors", "--device", "cpu"])
    progress = capsys.readouterr().err.splitlines()
    assert progress[0].startswith("[1/") and progress[-1].startswith(f"[{len(progress)}/{len(progress)}]")
    model, _ = load_model(first, progress=False)
    assert sum(getattr(m, "nvfp4", None) is not None for m in model.modules()) > 0
    err = _run(capsys, first, str(tmp_path / "twice"))
    assert "already quantized (quant_method 'compressed-tensors')" in err


def test_fp8_codes_without_a_quantization_config_are_refused_naming_the_tensor(tiny_path, tmp_path, capsys):
    src = str(tmp_path / "fp8")
    os.makedirs(src)
    weights = load_file(os.path.join(tiny_path, "model.safetensors"))
    name = next(n for n in weights if n.endswith("mlp.up_proj.weight"))
    weights[name] = weights[name].to(torch.float8_e4m3fn)
    weights[name + "_scale_inv"] = torch.ones(1)
    save_file(weights, os.path.join(src, "model.safetensors"))
    with open(os.path.join(tiny_path, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with open(os.path.join(src, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    err = _run(capsys, src, str(tmp_path / "out"))
    assert f"tensor {name} in model.safetensors is stored as F8_E4M3" in err


def test_output_folder_inside_the_source_is_not_copied_into_itself(tiny_path, tmp_path, capsys):
    """--out SRC/nvfp4: the side files (tokenizer, generation config) are copied, the output folder itself is not
    (before: OUT/nvfp4/ held a second copy of the output's shards)."""
    src = str(tmp_path / "src")
    shutil.copytree(tiny_path, src)
    out = os.path.join(src, "nvfp4")
    quantize.main(["--src", src, "--out", out, "--format", "modelopt", "--device", "cpu"])
    capsys.readouterr()
    assert sorted(os.listdir(out)) == sorted(["config.json", "model-00001.safetensors", "model.safetensors.index.json"]
                                             + [n for n in os.listdir(tiny_path) if n.endswith(".json")
                                                and n != "config.json"])
    load_model(out, progress=False)


def test_modelopt_output_names_the_weight_only_algorithm_its_tensors_hold(tiny_path, tmp_path):
    """The command writes no input_scale (weight-only), so its ModelOpt config says W4A16_NVFP4: ModelOpt's "NVFP4" is
    W4A4, whose every quantized Linear carries an input_scale that vLLM's W4A4 path (ModelOptNvFp4LinearMethod, the
    cutlass GEMM on Blackwell) multiplies into its alpha; named "NVFP4", the output was served with a scale it never
    had. compressed-tensors says the same with input_activations null (NVFP4A16)."""
    out = str(tmp_path / "nvfp4")
    quantize.quantize_folder(tiny_path, out, "modelopt", progress=False)
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        config = json.load(f)["quantization_config"]
    with open(os.path.join(out, "model.safetensors.index.json"), encoding="utf-8") as f:
        names = json.load(f)["weight_map"]
    assert [n for n in names if n.endswith("weight_scale_2")]
    assert not [n for n in names if n.endswith("input_scale")]
    assert (config["quant_algo"], config["group_size"]) == ("W4A16_NVFP4", 16)
    # every kept Linear-like weight is named, the GDN conv1d [C, 1, K] among them (ModelOpt's exports list it; vLLM
    # builds it as a ColumnParallelLinear, which some releases give the quantization config)
    kept = sorted(n[: -len(".weight")] for n in names if n.endswith(".weight") and n[: -len(".weight")] + ".weight_scale"
                  not in names and len(load_file(os.path.join(out, names[n]))[n].shape) >= 2)
    assert sorted(config["ignore"]) == kept and [n for n in kept if n.endswith("linear_attn.conv1d")]
    assert load_model_card(out)["quantization"] == "nvfp4"


def test_compressed_tensors_output_says_it_is_compressed(tiny_path, tmp_path):
    """quantization_status "compressed", as llm-compressor's exports say: transformers (quantizer_compressed_tensors.py,
    is_quantization_compressed) builds the packed modules that take weight_packed only then; without it the status is
    compressed-tensors' default "initialized" and the folder reads as dense weights it does not hold."""
    out = str(tmp_path / "ct")
    quantize.quantize_folder(tiny_path, out, "compressed-tensors", progress=False)
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        config = json.load(f)["quantization_config"]
    assert config["quantization_status"] == "compressed" and config["format"] == "nvfp4-pack-quantized"


def test_lm_head_of_a_tied_checkpoint_is_refused(tiny_path, tmp_path, capsys):
    """--lm-head on a folder without lm_head.weight (tie_word_embeddings, as Qwen3.5's 0.8B-4B ship): one line, exit
    status 2, nothing written; before, the output said nothing of the head it did not quantize."""
    src = str(tmp_path / "tied")
    shutil.copytree(tiny_path, src)
    path = os.path.join(src, "model.safetensors")
    weights = load_file(path)
    del weights["lm_head.weight"]
    save_file(weights, path)
    out = str(tmp_path / "out")
    with pytest.raises(SystemExit) as exit_info:
        quantize.main(["--src", src, "--out", out, "--format", "modelopt", "--lm-head", "--device", "cpu"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and f"--lm-head: {src} stores no lm_head.weight" in err and not os.path.exists(out)


def test_refusals_name_the_command_readme_gives(tmp_path, capsys):
    """README's Models section gives `python -m kernels.nvfp4.quantize` and `python -m worker.tiny`; their refusals said
    `quantize.py: error: ...` and `tiny.py: error: ...` (argparse's file name), unlike every other command here."""
    err = _run(capsys, "/no/such/folder", str(tmp_path / "a"))
    assert err == "python -m kernels.nvfp4.quantize: error: --src /no/such/folder: no such folder\n"
    with pytest.raises(SystemExit):
        tiny.main(["--arch", "llama", "--out", str(tmp_path / "t")])
    assert capsys.readouterr().err.splitlines()[-1].startswith("python -m worker.tiny: error: argument --arch: ")
