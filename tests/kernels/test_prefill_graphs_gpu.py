"""GPU tests: the piecewise CUDA graphs of prefill and mixed steps (worker/prefill_graphs.py) give the eager step's
logits and cache writes: fresh prompts, two prompts in one step, a chunk with context beside decode rows, replays of
one captured size with other rows, the static buffers NaN-poisoned first (padding rows must not reach real rows).

Models: the small Qwen3.5 of test_model_gpu (128-wide GDN heads) in bf16 with dense Linears, and the same shape with
NVFP4 Linears (the GDN gates b / a left bf16, as NVFP4 recipes leave them: two projection launches a GDN layer).
Graph and eager steps differ only in the GEMMs' padded row count (their tile / split choice), so they agree to bf16
rounding carried through 8 layers.
"""
import pytest
import torch

from tests.kernels.test_model_gpu import BLOCK, build, kernel_config
from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.graphs import forward_step
from worker.models.qwen3_5 import Qwen3_5ForCausalLM
from worker.models.qwen3_5_weights import tensor_shapes
from worker.prefill_graphs import PrefillGraphs
from worker.tiny import _init

pytestmark = pytest.mark.gpu
TOL = 3e-2  # ||graph - eager|| / ||eager||
# steps: (tokens, context, slot, blocks) rows
STEPS = [
    [(20, 0, 1, [0, 1])],                                              # P = 32
    [(70, 0, 2, [2, 3, 4, 5, 6]), (33, 0, 3, [7, 8, 9])],              # P = 128
    [(1, 20, 1, [0, 1]), (40, 70, 2, [2, 3, 4, 5, 6, 10, 11]), (1, 33, 3, [7, 8, 9])],  # mixed, P = 48
    [(1, 21, 1, [0, 1]), (25, 0, 5, [12, 13]), (1, 110, 2, [2, 3, 4, 5, 6, 10, 11, 14])],  # P = 32 again
    [(6, 0, 4, [15])],                                                 # a short prompt, P = 8
    [(1, 22, 1, [0, 1]), (9, 6, 4, [15])],                             # its next 9 tokens beside a decode row, P = 16
]


def _nvfp4_model(config):
    from bench.gpu_model import random_nvfp4

    tensors = {}
    for name, shape in tensor_shapes(config).items():
        linear = len(shape) == 2 and name != "embed_tokens.weight" and not name.endswith(("in_proj_b.weight",
                                                                                           "in_proj_a.weight"))
        tensors[name] = random_nvfp4(*shape) if linear else _init(name, shape).to("cuda", torch.bfloat16)
    return Qwen3_5ForCausalLM(config, tensors).eval()


@pytest.fixture(scope="module", params=["dense", "nvfp4"])
def model(request):
    config = kernel_config()
    return build(config, torch.bfloat16, "cuda") if request.param == "dense" else _nvfp4_model(config)


def _cache(config, num_slots=8):
    cache = ModelCache(config, num_blocks=32, block_size=BLOCK, num_slots=num_slots, device="cuda",
                       dtype=torch.bfloat16)
    gen = torch.Generator(device="cuda").manual_seed(7)
    for pool in (*cache.k_cache, *cache.v_cache, *cache.recurrent_state, *cache.conv_state):
        pool.copy_(0.05 * torch.randn(pool.shape, generator=gen, device="cuda"))
    return cache


def _rows(step, vocab, seed):
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, vocab, (n,), generator=gen).tolist(), ctx, slot, blocks, True)
            for n, ctx, slot, blocks in step]


def _rel(got, want) -> float:
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def test_piecewise_graph_steps_match_the_eager_steps(model):
    config = model.config
    eager_cache, graph_cache = _cache(config), _cache(config)
    pieces = PrefillGraphs.create(model, graph_cache, on=True, verbose=False)
    assert pieces is not None
    for bufs in [pieces.ids[None]] + [b for group in pieces.proj.values() for b in group] + list(pieces.core.values()):
        if bufs.is_floating_point():
            bufs.fill_(float("nan"))
    for i, step in enumerate(STEPS):
        rows = _rows(step, config.vocab_size, seed=i)
        seq_lens, ctx = [len(r[0]) for r in rows], [r[1] for r in rows]
        assert pieces.serves(sum(seq_lens))
        want = model.forward(ForwardBatch.from_rows(rows, BLOCK).to("cuda"), eager_cache)
        got = forward_step(model, graph_cache, ForwardBatch.from_rows(rows, BLOCK).to("cuda"), None, seq_lens, ctx,
                           pieces)
        assert got.shape == want.shape and torch.isfinite(got).all()
        assert _rel(got, want) < TOL, f"step {i}: logits differ by {_rel(got, want):.2e}"
    assert sorted(pieces.graphs) == [8, 16, 32, 48, 128]
    for name in ("k_cache", "v_cache", "recurrent_state", "conv_state"):
        for want_pool, got_pool in zip(getattr(eager_cache, name), getattr(graph_cache, name)):
            assert torch.isfinite(got_pool).all()
            assert _rel(got_pool, want_pool) < TOL, f"{name} differs by {_rel(got_pool, want_pool):.2e}"


def test_the_eager_warm_up_at_start_leaves_nothing_a_request_reads(model):
    """worker/warmup.py runs one eager step of each 2..16 tokens on slots and blocks from 0; a fresh request served
    there afterwards gets the logits it gets on an untouched cache."""
    from types import SimpleNamespace

    from worker.warmup import WARM_MAX_TOKENS, warm_up_eager

    config = model.config
    warmed = _cache(config, num_slots=16)  # 15 rows at 16 tokens; 2 blocks a row
    assert warm_up_eager(SimpleNamespace(model=model, cache=warmed, graphs=None, prefill_graphs=None), False) == \
        WARM_MAX_TOKENS - 1
    assert warm_up_eager(SimpleNamespace(model=model, cache=_cache(config), graphs=None, prefill_graphs=None),
                         False) == 8  # 8 slots: steps of 2..9 tokens
    rows = _rows([(20, 0, 0, [0, 1]), (1, 0, 3, [2])], config.vocab_size, seed=9)
    want = model.forward(ForwardBatch.from_rows(rows, BLOCK).to("cuda"), _cache(config, num_slots=16))
    got = model.forward(ForwardBatch.from_rows(rows, BLOCK).to("cuda"), warmed)
    assert torch.isfinite(got).all() and _rel(got, want) < TOL  # split-K sums may add in another order
