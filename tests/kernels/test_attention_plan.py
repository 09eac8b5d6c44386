"""GPU tests: kernels/attention/step_plan.py, a prefill or mixed step's attention launches planned once and run for
every attention layer, against the unplanned launches (prologue.qk_norm_rope_cache, ops.paged_decode with the
decode rows gathered out and scattered back, themselves checked against torch in test_attn_prologue.py and
test_paged_decode_cuda.py).

The kernel-shaped model of test_model_gpu.py (two attention layers of eight) runs packed steps whose decode rows lead
(the plan serves them in place) or sit between prefill rows (the plan serves the prologue only), eagerly and through
the piecewise prefill graphs; logits and both KV pools must equal the unplanned run's bit for bit.
"""
import pytest
import torch

from tests.kernels.test_model_gpu import BLOCK, _cache, build, kernel_config
from worker.batch import ForwardBatch
from worker.layers import attention as attention_layer
from worker.layers.paged_attention import PagedStepMeta
from worker.prefill_graphs import PrefillGraphs

pytestmark = pytest.mark.gpu

# (seq, first token, end token) per step; seq -> slot SLOTS[seq]; step 0 prefills sequences 0-3
LEADING = [[(0, 0, 40), (1, 0, 21), (2, 0, 3), (3, 0, 64)],
           [(0, 40, 41), (2, 3, 4), (3, 64, 65), (1, 21, 50)],
           [(0, 41, 42), (1, 50, 51), (2, 4, 5), (3, 65, 66), (4, 0, 17)]]
BETWEEN = [LEADING[0], [(0, 40, 41), (1, 21, 50), (2, 3, 4), (3, 64, 65)],
           [(4, 0, 9), (0, 41, 42), (1, 50, 51), (2, 4, 5), (3, 65, 66)]]
SLOTS = [1, 3, 5, 7, 0]


@pytest.fixture(scope="module")
def gpu_model():
    config = kernel_config()
    return config, build(config, torch.bfloat16, "cuda")


def _run(model, config, schedule, graphs: bool):
    """Runs schedule on a fresh cache; -> (per-step logits, k pools, v pools, plans made)."""
    gen = torch.Generator().manual_seed(5)
    ids = {n: torch.randint(0, config.vocab_size, (80,), generator=gen).tolist() for n in range(5)}
    blocks = {n: [6 * n + j for j in range(6)][::-1] for n in range(5)}
    cache = _cache(config, "cuda", torch.bfloat16)
    torch.manual_seed(11)  # unused pool rows hold the same noise in every run, not zeros
    for pool in cache.k_cache + cache.v_cache:
        pool.normal_()
    pieces = PrefillGraphs(model, cache, capture=True, verbose=False) if graphs else None
    plans, logits = [], []
    prepare = model.prepare

    def spy(batch, block_size):
        step = prepare(batch, block_size)
        plans.append(step.attn)
        return step

    model.prepare = spy
    try:
        for step in schedule:
            rows = [(ids[n][lo:hi], lo, SLOTS[n], blocks[n], True) for n, lo, hi in step]
            batch = ForwardBatch.from_rows(rows, BLOCK).to("cuda")
            logits.append((pieces.forward(batch) if graphs else model(batch, cache)).float())
    finally:
        model.prepare = prepare
    return logits, torch.stack(cache.k_cache), torch.stack(cache.v_cache), plans


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "pieces"])
@pytest.mark.parametrize("schedule", [LEADING, BETWEEN], ids=["decode_leading", "decode_between"])
def test_planned_steps_equal_the_unplanned_launches(gpu_model, schedule, graphs, monkeypatch):
    config, model = gpu_model
    monkeypatch.setattr(attention_layer, "DECODE_KERNEL", "1")  # the paged decode kernels for every decode row
    monkeypatch.setattr(attention_layer, "PLANNED", False)
    want = _run(model, config, schedule, graphs)
    monkeypatch.setattr(attention_layer, "PLANNED", True)
    got = _run(model, config, schedule, graphs)
    for step, (g, w) in enumerate(zip(got[0], want[0])):
        assert not torch.isnan(g).any()
        assert torch.equal(g, w), f"step {step}: logits differ by {(g - w).abs().max().item()}"
    assert torch.equal(got[1], want[1]) and torch.equal(got[2], want[2])  # every pool row written alike
    metas = [m for m in got[3] if isinstance(m, PagedStepMeta)]
    assert all(m.attn_plan is not None for m in metas)  # each step was planned
    served = [m.attn_plan.num_decode for m in metas]
    assert served == ([0, 3, 4] if schedule is LEADING else [0, 0, 0])
    assert all(m.attn_plan is None for m in want[3] if isinstance(m, PagedStepMeta))


def test_a_layer_of_another_layout_gets_its_own_plan(gpu_model):
    from kernels.attention.step_plan import AttentionPlan

    torch.manual_seed(3)
    qg = torch.randn(6, 4, 128, device="cuda").bfloat16()
    kv = torch.randn(6, 128, device="cuda").bfloat16()
    pools = [torch.randn(8, BLOCK, 2, 64, device="cuda").bfloat16() for _ in range(2)]
    norm = torch.randn(64, device="cuda").bfloat16()
    cos = torch.randn(6, 32, device="cuda").bfloat16()
    plan = AttentionPlan(qg, kv, kv, norm, norm, 1e-6, cos, cos, torch.arange(6, device="cuda"), pools)
    assert plan.matches(qg, kv, kv, pools[0], 1e-6)
    assert not plan.matches(qg[:5], kv[:5], kv[:5], pools[0], 1e-6)
    assert not plan.matches(qg, kv, kv, pools[0], 1e-5)
