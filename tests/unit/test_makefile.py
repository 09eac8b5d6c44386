"""Unit tests: the Makefile's first step on a machine without a usable Python says so in one line (an old python3
failed deep in pip: 'Cannot install torch==2.13.0 because these package versions have conflicting dependencies')."""
import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def clone(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("no make")
    for name in ("Makefile", "requirements.txt", "requirements-dev.txt"):
        shutil.copy(os.path.join(REPO, name), tmp_path)
    return tmp_path


def make_venv(folder, python: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "venv", f"PYTHON={python}"], cwd=folder, capture_output=True, text=True,
                          timeout=60)


def test_a_missing_python_is_named(clone):
    result = make_venv(clone, "/nonexistent/python3")
    assert result.returncode != 0 and not (clone / ".venv").exists()
    assert result.stderr.splitlines()[0] == ("SparkInfer needs Python 3.10 or later; PYTHON=/nonexistent/python3 is "
                                             "not found. Name another: make run PYTHON=python3.12")


def test_an_old_python_is_refused_before_the_venv(clone):
    old = clone / "python3.9"
    old.write_text('#!/bin/sh\ncase "$1" in --version) echo "Python 3.9.18";; *) exit 1;; esac\n')
    old.chmod(0o755)
    result = make_venv(clone, str(old))
    assert result.returncode != 0 and not (clone / ".venv").exists()
    assert result.stderr.splitlines()[0] == (f"SparkInfer needs Python 3.10 or later; PYTHON={old} is Python 3.9.18. "
                                             f"Name another: make run PYTHON=python3.12")


def test_bench_gpu_without_a_gpu_says_so_once(tmp_path):
    stub = tmp_path / "python3"
    stub.write_text("#!/bin/sh\nexit 1\n")
    stub.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    result = subprocess.run(["make", "-s", "bench-gpu"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and result.stdout == ""
    assert result.stderr.splitlines()[0] == ("make bench-gpu needs a CUDA GPU and python3 with CUDA torch (as on the "
                                             f"GPU machine); {stub} has none")


@pytest.mark.parametrize("env, served", [
    ({"SPARKINFER_MODEL": "/ckpt/qwen"}, "/ckpt/qwen"),
    ({"MODEL": "/ckpt/a", "SPARKINFER_MODEL": "/ckpt/b"}, "/ckpt/a"),
    ({}, "models/tiny"),
], ids=["sparkinfer-model", "model-wins", "default"])
def test_make_run_serves_the_checkpoint_either_name_gives(env, served):
    """README's Configuration table names the checkpoint `MODEL` (make) / `SPARKINFER_MODEL`; `make run` passes the
    environment on (SPARKINFER_PORT=8081 make run serves on 8081), but SPARKINFER_MODEL=/path make run served the tiny
    model: the launcher got --model models/tiny, which wins over the variable."""
    base = {k: v for k, v in os.environ.items() if k not in ("MODEL", "SPARKINFER_MODEL", "MAKEFLAGS", "MFLAGS")}
    result = subprocess.run(["make", "-n", "run"], cwd=REPO, env={**base, **env}, capture_output=True, text=True,
                            timeout=60)
    launch = [line for line in result.stdout.splitlines() if "-m deploy.launch" in line]
    assert launch and launch[-1].endswith(f"-m deploy.launch --model {served}"), result.stdout
    writes_tiny = [line for line in result.stdout.splitlines() if 'if [ "models/tiny" = "models/tiny" ]' in line]
    assert bool(writes_tiny) == (served == "models/tiny")
