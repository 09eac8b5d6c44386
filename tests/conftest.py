"""Shared pytest setup: GPU tests skip cleanly where no CUDA device is present, and every worker a test starts runs
on the CPU unless the caller's environment names a device.

Why the CPU default: the e2e and unit tests compare the served tokens with transformers' float32 CPU forward token
for token (greedy decoding, batch and preemption invariance, score logprobs to 1e-3), which the worker's bfloat16
CUDA path does not promise on the random tiny model, and size the KV pool from 128 MiB of host memory. On an H200
(session 16, device runs 2-3) 8 of 217 e2e tests failed with the worker on CUDA: bfloat16 token or logprob drift
(3), a KV pool sized from GPU memory (2: max_model_len 8192, not 4096), a forced string's sampled text (1), and the
transformers reference itself (2: fla's Triton kernels handed CPU tensors, fla installed).
The CUDA path has its own tests (`-m gpu`, tests/kernels); `SPARKINFER_DEVICE=cuda make test` runs the rest on it
for exploration. Every other SPARKINFER_* variable of the caller's environment but the worker's CUDA kernel choices is
dropped before any test runs (tests/unit/test_test_environment.py).
"""
import os

import pytest

from worker.switches import CUDA_CHOICES, PAGED_DECODE, SWITCHES

# The settings of the user's own server in the shell that runs `make test` (SPARKINFER_API_KEY, _MAX_MODEL_LEN,
# _SERVED_MODEL_NAME, ...) reached every stack a test starts, which inherits this environment: a key made every e2e
# request a 401. Kept: the device and the worker's CUDA kernel choices, which an A/B run of the GPU tests sets.
_KEPT = {"SPARKINFER_DEVICE", PAGED_DECODE[0], *SWITCHES, *CUDA_CHOICES}
for _name in [name for name in os.environ if name.startswith("SPARKINFER_") and name not in _KEPT]:
    del os.environ[_name]
os.environ.setdefault("SPARKINFER_DEVICE", "cpu")


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
