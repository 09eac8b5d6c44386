"""GPU tests: a mixed step's decode rows run as one-token chunks of the chunked GDN kernels (worker/layers/gdn_meta.py,
up to MIXED_CHUNKED_MAX_DECODE rows) give what the decode kernels give when the step splits them out
(MIXED_STEPS_CHUNKED False); a split step whose decode rows lead takes them as row views through one DecodePlan
(kernels/gdn/decode_plan.py) for every layer. The kernel-shaped model of test_model_gpu.py; the decode rows continue
30-token prompts on their own slots; logits and recurrent states compared.
"""
import dataclasses

import pytest
import torch

from tests.kernels.test_model_gpu import BLOCK, build, kernel_config
from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.layers import gdn_meta as gdn_layer

pytestmark = pytest.mark.gpu
TOL = 2e-2  # bf16 activations, chunked against recurrent kernels


@pytest.fixture(scope="module")
def gpu_model():
    config = kernel_config()
    return config, build(config, torch.bfloat16, "cuda")


def _run(model, config, num_decode: int, prompt: int):
    """Prefills num_decode 30-token rows (slots 1..), then one step: their next tokens + a fresh `prompt`-token row
    (slot 0). -> (that step's logits [num_decode + 1, V] float32, the recurrent state pools)."""
    gen = torch.Generator().manual_seed(num_decode * 1000 + prompt)
    ids = [torch.randint(0, config.vocab_size, (31,), generator=gen).tolist() for _ in range(num_decode)]
    fresh = torch.randint(0, config.vocab_size, (prompt,), generator=gen).tolist()
    cache = ModelCache(config, num_blocks=4 * num_decode + 16, block_size=BLOCK, num_slots=num_decode + 1,
                       device="cuda", dtype=torch.bfloat16, state_dtype=torch.float32)
    blocks = [[3 * r + 1, 3 * r + 2, 3 * r + 3] for r in range(num_decode)]
    first = [(ids[r][:30], 0, r + 1, blocks[r], True) for r in range(num_decode)]
    model(ForwardBatch.from_rows(first, BLOCK).to("cuda"), cache)
    step = [(ids[r][30:], 30, r + 1, blocks[r], True) for r in range(num_decode)]
    step.append((fresh, 0, 0, [0] + list(range(3 * num_decode + 1, 3 * num_decode + 1 + prompt // BLOCK)), True))
    logits = model(ForwardBatch.from_rows(step, BLOCK).to("cuda"), cache).float()
    return logits, cache.recurrent_state.float()


@pytest.mark.parametrize("num_decode,prompt", [(16, 200), (9, 40)])
def test_chunked_decode_rows_match_the_split_step(gpu_model, num_decode, prompt, monkeypatch):
    config, model = gpu_model
    assert gdn_layer.GdnStepMeta.from_lists(
        [0] + list(range(1, num_decode + 1)) + [num_decode + prompt], [30] * num_decode + [0],
        list(range(num_decode + 1)), "cpu").all_prefill  # the rule chunks this step
    got = _run(model, config, num_decode, prompt)
    monkeypatch.setattr(gdn_layer, "MIXED_STEPS_CHUNKED", False)
    want = _run(model, config, num_decode, prompt)
    for g, w in zip(got, want):
        assert not torch.isnan(g).any()
        rel = ((g - w).norm() / w.norm()).item()
        assert rel < TOL, rel


@pytest.mark.parametrize("num_decode,prompt", [(40, 64), (20, 300)])
def test_split_step_with_leading_decode_rows_equals_the_gathered_split(gpu_model, num_decode, prompt, monkeypatch):
    """A split step whose decode rows lead (GdnStepMeta.num_leading_decode: row views, their decode core planned
    once) equals the same step through the gather / scatter of its rows and ops.gdn_decode, bit for bit."""
    config, model = gpu_model
    monkeypatch.setattr(gdn_layer, "MIXED_STEPS_CHUNKED", False)
    from_lists = gdn_layer.GdnStepMeta.from_lists
    metas = []

    def spy(*args, **kwargs):
        metas.append(from_lists(*args, **kwargs))
        return metas[-1]

    monkeypatch.setattr(gdn_layer.GdnStepMeta, "from_lists", staticmethod(spy))
    got = _run(model, config, num_decode, prompt)
    assert metas[-1].num_leading_decode == num_decode and metas[-1].decode_plan is not None
    monkeypatch.setattr(gdn_layer.GdnStepMeta, "from_lists",
                        staticmethod(lambda *a, **k: dataclasses.replace(from_lists(*a, **k), num_leading_decode=0)))
    want = _run(model, config, num_decode, prompt)
    for g, w in zip(got, want):
        assert not torch.isnan(g).any()
        assert torch.equal(g, w)
