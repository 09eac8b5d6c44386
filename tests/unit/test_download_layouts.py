"""Unit tests (CPU): checkpoint folders as downloads leave them. A clone made without git-lfs holds Git LFS pointer
files in place of its shards and tokenizer.json: each is refused naming the file and what to run, by `make run`'s
preflight before anything starts, by the worker and by the quantize command; before, the shard failed as "Error while
deserializing header: header too large" (the safetensors error of huggingface/transformers#27923,
deepseek-ai/DeepSeek-V3#557) and tokenizer.json as a JSON parse error. A Hugging Face hub cache folder given as MODEL
is refused naming the snapshot inside it."""
import os
import shutil

import pytest

from deploy.preflight import model_problem
from worker.loader import MissingFileError, load_model
from worker.tiny import write_tiny_checkpoint

POINTER = ("version https://git-lfs.github.com/spec/v1\n"
           "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 4976698672\n")
LFS = "a Git LFS pointer, not the file (cloned without git-lfs: run `git lfs pull` in the folder"


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tiny"))
    write_tiny_checkpoint(path)
    return path


@pytest.mark.parametrize("pointer", ["model.safetensors", "tokenizer.json"])
def test_lfs_pointers_are_refused_naming_the_file(tiny_path, tmp_path, pointer):
    folder = str(tmp_path / "clone")
    shutil.copytree(tiny_path, folder)
    path = os.path.join(folder, pointer)
    with open(path, "w", encoding="utf-8") as f:
        f.write(POINTER)
    assert model_problem(folder, "/").startswith(f"cannot serve MODEL={folder}: checkpoint file {path}: {LFS}")
    if pointer.endswith(".safetensors"):
        with pytest.raises(MissingFileError) as error:
            load_model(folder, progress=False)
        assert str(error.value).startswith(f"checkpoint file {path}: {LFS}")


def test_the_real_folder_passes(tiny_path):
    assert model_problem(tiny_path, "/") is None


def test_quantize_command_names_an_lfs_pointer_shard(tiny_path, tmp_path, capsys):
    """The quantize command's source the same way: one line, exit status 2 (a safetensors traceback before)."""
    from kernels.nvfp4 import quantize

    src, out = str(tmp_path / "clone"), str(tmp_path / "out")
    shutil.copytree(tiny_path, src)
    path = os.path.join(src, "model.safetensors")
    with open(path, "w", encoding="utf-8") as f:
        f.write(POINTER)
    with pytest.raises(SystemExit) as exit_info:
        quantize.main(["--src", src, "--out", out, "--format", "modelopt", "--device", "cpu"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and f"--src {src}: checkpoint file {path}: {LFS}" in err
    assert "Traceback" not in err and not os.path.exists(out)


def test_a_hub_cache_folder_names_its_snapshot(tiny_path, tmp_path):
    """MODEL=~/.cache/huggingface/hub/models--ORG--NAME (the cache folder, not the checkpoint inside it): the refusal
    names snapshots/HASH, the folder that holds config.json."""
    cache = tmp_path / "models--Qwen--Qwen3.5-4B"
    shutil.copytree(tiny_path, str(cache / "snapshots" / "abc123"))
    (cache / "refs").mkdir()
    (cache / "refs" / "main").write_text("abc123")
    problem = model_problem(str(cache), "/")
    assert problem.endswith(f"*.safetensors, as in {cache / 'snapshots' / 'abc123'})"), problem
    assert f"checkpoint file {cache / 'config.json'}: missing" in problem


def test_a_hub_cache_folder_without_a_main_ref_names_its_snapshot(tiny_path, tmp_path):
    """A download of one commit (snapshot_download(revision=<commit hash>), `hf download --revision <hash>`) writes no
    refs/main: its snapshot was not named. The snapshot that holds config.json is named, the newest of several."""
    cache = tmp_path / "models--Qwen--Qwen3.5-4B"
    shutil.copytree(tiny_path, str(cache / "snapshots" / "old1"))
    shutil.copytree(tiny_path, str(cache / "snapshots" / "new2"))
    (cache / "snapshots" / "empty3").mkdir()
    os.utime(cache / "snapshots" / "old1", (1_000_000, 1_000_000))
    problem = model_problem(str(cache), "/")
    assert problem.endswith(f"*.safetensors, as in {cache / 'snapshots' / 'new2'})"), problem


@pytest.mark.parametrize("name, what", [("qwen3.5-4b-q4_k_m.gguf", "a GGUF file (llama.cpp / Ollama's format)"),
                                        ("model.safetensors", "a file")])
def test_a_file_given_as_model_is_named_as_one(tiny_path, tmp_path, name, what):
    """MODEL=path/to/model.gguf (what llama-server -m and an Ollama Modelfile take): said to be a file and what is read
    instead, where it said "checkpoint folder does not exist" of a file that does."""
    path = tmp_path / name
    path.write_bytes(b"GGUF")
    want = f"checkpoint file {path}: {what}, not a checkpoint folder: give the Hugging Face folder that holds"
    assert model_problem(str(path), "/").startswith(f"cannot serve MODEL={path}: {want}")
    with pytest.raises(MissingFileError) as error:
        load_model(str(path), progress=False)
    assert str(error.value).startswith(want)
