"""GPU test: asynchronous scheduling on the device path (CUDA-graph decode steps, sampling launched without waiting,
previous_token ids read on the device, CUDA events polled by worker/pipeline.py): the pipelined run gives the
synchronous run's tokens and logprobs (same kernels in the same order on the same inputs)."""
import pytest
import torch

from tests.kernels.test_model_gpu import build, kernel_config
from tests.unit.test_worker_pipeline import serve_pipelined, serve_sync

pytestmark = pytest.mark.gpu


def test_pipelined_steps_on_the_gpu_give_the_synchronous_tokens():
    config = kernel_config()
    model = (build(config, torch.bfloat16, "cuda"), config)
    want = serve_sync(model, device="cuda", dtype=torch.bfloat16)
    got, num_ahead = serve_pipelined(model, device="cuda", dtype=torch.bfloat16)
    assert got == want
    assert num_ahead >= 10
