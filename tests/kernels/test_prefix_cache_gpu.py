"""GPU test: a prefix-cache hit on the CUDA path (state slots copied on the GPU, CUDA-graph decode steps, GDN and
NVFP4-free bf16 kernels) gives the cold run's greedy tokens. Bits may differ from the cold run (the split-K GEMV
sums with float atomics), so tokens must match up to a near tie and logprobs within bf16 noise.
"""
import pytest
import torch

from proto import pb
from tests.kernels.test_model_gpu import build, kernel_config
from tests.unit.test_prefix_cache_model import Harness, text

pytestmark = pytest.mark.gpu
IM_START = 500  # a token id of the 512-token kernel-shaped model, used as <|im_start|>
GREEDY = pb.SamplingParams(num_logprobs=2)
TIE = 0.05  # nats between the top two choices under which a flipped greedy pick is a tie, not an error


@pytest.fixture(scope="module")
def gpu_model():
    config = kernel_config()
    return build(config, torch.bfloat16, "cuda"), config


def _prompt(system: list, user: list) -> list:
    return [IM_START] + system + [IM_START] + user + [IM_START, 7, 8]


def _same_up_to_a_tie(hit, cold):
    """Greedy ids equal until a position where the cold run's top two logprobs are within TIE; logprobs close."""
    for i, (a, b) in enumerate(zip(hit[0], cold[0])):
        top = cold[2][i][1]
        if a != b:
            assert len(top) > 1 and top[0] - top[1] < TIE, (i, hit[0], cold[0], top)
            return
        assert abs(hit[1][i] - cold[1][i]) < 5e-2, (i, hit[1][i], cold[1][i])


@pytest.mark.parametrize("state_dtype", [torch.float32, torch.bfloat16], ids=["state_f32", "state_bf16"])
def test_hit_on_the_gpu_matches_the_cold_run(gpu_model, state_dtype, monkeypatch):
    monkeypatch.setattr("tests.unit.test_prefix_cache_model.IM_START", IM_START)
    kwargs = dict(min_tokens=32, device="cuda", dtype=torch.bfloat16, state_dtype=state_dtype)
    system = [t % 480 + 3 for t in text(3, 150)]
    turn2 = _prompt(system, [t % 480 + 3 for t in text(5, 40)])
    warm = Harness(gpu_model, **kwargs)
    warm.serve("t1", _prompt(system, [t % 480 + 3 for t in text(4, 25)]), GREEDY, max_tokens=4)
    hit = warm.serve("t2", turn2, GREEDY, max_tokens=12)
    cold = Harness(gpu_model, **kwargs).serve("t2", turn2, GREEDY, max_tokens=12)
    assert hit[3] >= 144 and cold[3] == 0          # turn 1's system prompt came from the cache
    _same_up_to_a_tie(hit, cold)
