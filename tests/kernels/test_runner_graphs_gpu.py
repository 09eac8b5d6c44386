"""GPU tests: CUDA-graph decode steps (worker/graphs.py, worker/model_runner.py) give the same greedy tokens as the
eager forward, for requests of different prompt lengths joining and leaving (padded row counts 1..8, a fresh
one-token prompt inside an all-decode step); and the NVFP4 routing of 32 < M <= 128 rows in worker/layers/linear.py.

The model is the small in-memory Qwen3.5 with the kernels' 128-wide GDN heads, bf16 on the GPU (what graphs serve).
Graph and eager steps differ only in the attention's padded key width and the GEMV's padded rows, so their logits
agree to bf16 rounding; a greedy pick may still flip where the top two logits (nearly) tie: a divergence is accepted
only at such a near tie, and is printed.
"""
import math

import pytest
import torch

from tests.kernels.test_model_gpu import BLOCK, build, kernel_config
from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.graphs import DecodeGraphs, forward_step, padded_sizes

pytestmark = pytest.mark.gpu
# (name, prompt length, step it joins at, tokens to generate); E is a one-token prompt (an all-decode-shaped fresh row)
REQUESTS = [("A", 20, 0, 14), ("B", 7, 2, 20), ("C", 33, 3, 6), ("E", 1, 6, 7), ("D", 5, 11, 9), ("F", 9, 11, 5)]
SLOTS = {"A": 6, "B": 1, "C": 3, "D": 9, "E": 4, "F": 0}
TIE = 0.01  # a flipped pick is a near tie when the eager logits of the two tokens differ by < TIE * max |logit|


@pytest.fixture(scope="module")
def model():
    config = kernel_config()
    return build(config, torch.bfloat16, "cuda")


def _cache(config):
    return ModelCache(config, num_blocks=96, block_size=BLOCK, num_slots=12, device="cuda", dtype=torch.bfloat16)


def _serve(model, cache, graphs):
    """Runs REQUESTS to completion (decode rows first, then whole-prompt prefill rows). Returns (tokens per request,
    per-step logits by request, number of steps the graphs served)."""
    gen = torch.Generator().manual_seed(5)
    seqs = {n: torch.randint(0, model.config.vocab_size, (p,), generator=gen).tolist() for n, p, _, _ in REQUESTS}
    prompt_len = {n: p for n, p, _, _ in REQUESTS}
    quota = {n: q for n, _, _, q in REQUESTS}
    blocks = {n: [7 * i + j for j in range(7)] for i, n in enumerate(sorted(SLOTS))}
    out, logits_log, served, step = {n: [] for n in seqs}, [], 0, 0
    while any(len(out[n]) < quota[n] for n in seqs):
        live = [n for n, _, join, _ in REQUESTS if join <= step and len(out[n]) < quota[n]]
        decode = [n for n in live if out[n]]
        order = decode + [n for n in live if not out[n]]
        rows = [(seqs[n][-1:] if out[n] else seqs[n], len(seqs[n]) - 1 if out[n] else 0, SLOTS[n], blocks[n], True)
                for n in order]
        step += 1
        if not rows:
            continue
        batch = ForwardBatch.from_rows(rows, BLOCK)
        batch = batch.to("cuda")
        seq_lens, ctx = [len(r[0]) for r in rows], [r[1] for r in rows]
        served += int(graphs is not None and graphs.serves(seq_lens, ctx))
        logits = forward_step(model, cache, batch, graphs, seq_lens, ctx).float().cpu()
        assert torch.isfinite(logits).all()
        logits_log.append(dict(zip(order, logits)))
        for n, row_logits in zip(order, logits):
            token = int(row_logits.argmax())
            out[n].append(token)
            seqs[n].append(token)
    assert all(len(seqs[n]) == prompt_len[n] + quota[n] for n in seqs)
    return out, logits_log, served


def test_padded_sizes_cover_every_row_count():
    sizes = padded_sizes(200)
    assert sizes[:7] == [1, 2, 4, 8, 16, 24, 32] and sizes[-1] == 200
    assert all(b > a for a, b in zip(sizes, sizes[1:]))
    assert padded_sizes(12) == [1, 2, 4, 8, 12]


def test_graph_decode_gives_the_eager_greedy_tokens(model):
    config = model.config
    eager_cache, graph_cache = _cache(config), _cache(config)
    want, want_logits, _ = _serve(model, eager_cache, None)
    graphs = DecodeGraphs.create(model, graph_cache, graph_cache.num_slots, on=True)
    assert graphs is not None and graphs.dummy_block == graph_cache.num_blocks
    assert graph_cache.k_cache[0].shape[0] == graph_cache.num_blocks + 1
    got, got_logits, served = _serve(model, graph_cache, graphs)
    print(f"graphs served {served} steps with {len(graphs.graphs)} captured graphs {sorted(graphs.graphs)}")
    assert served >= 10 and len(graphs.graphs) >= 3
    # unused slots (2, 5, 7, 8, 10, 11) never written: padding rows carry slot -1
    unused = [s for s in range(12) if s not in SLOTS.values()]
    assert graph_cache.recurrent_state[:, unused].abs().max() == 0
    assert graph_cache.conv_state[:, unused].abs().max() == 0
    for k, (w_step, g_step) in enumerate(zip(want_logits, got_logits)):
        assert list(w_step) == list(g_step)
        flips = [n for n in w_step if int(w_step[n].argmax()) != int(g_step[n].argmax())]
        for n in w_step:
            err = ((g_step[n] - w_step[n]).norm() / w_step[n].norm()).item()
            assert err < 3e-2, (k, n, err)
        if flips:
            n = flips[0]
            gap = (w_step[n].max() - w_step[n][int(g_step[n].argmax())]).item()
            print(f"first divergence at step {k}, request {n}: eager logit gap {gap:.4f}")
            assert gap <= TIE * w_step[n].abs().max().item(), "graph pick differs from eager beyond a near tie"
            return
    assert want == got


def test_runner_with_graphs_equals_runner_without(model, monkeypatch):
    """Through ModelRunner.execute (pb messages): the same sampled tokens with SPARKINFER_CUDA_GRAPHS=1 and =0."""
    try:
        from proto import pb
        from worker.model_runner import ModelRunner
    except Exception as exc:  # noqa: BLE001 - the device image may lack the generated stubs / protoc
        pytest.skip(f"proto stubs unavailable: {type(exc).__name__}: {exc}")
    results = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("SPARKINFER_CUDA_GRAPHS", flag)
        runner = ModelRunner(model, model.config, _cache(model.config), model.config.vocab_size)
        assert (runner.graphs is not None) == (flag == "1")
        results[flag] = _drive_runner(runner, pb)
    assert results["1"] == results["0"]


def _drive_runner(runner, pb) -> dict:
    """Two requests (prompts of 12 and 3 tokens, the second joining at step 3), greedy, 10 steps."""
    prompts = {"r1": list(range(5, 17)), "r2": [40, 41, 42]}
    blocks = {"r1": [2, 9, 4], "r2": [11, 3, 6]}
    slots, out = {"r1": 7, "r2": 2}, {"r1": [], "r2": []}
    for step_id in range(10):
        step = pb.PackedStep(step_id=step_id, session_id="s")
        for req, join in (("r1", 0), ("r2", 3)):
            if step_id < join:
                continue
            toks = out[req][-1:] if out[req] else prompts[req]
            if step_id == join:
                step.new_requests.add(req_id=req, sampling=pb.SamplingParams(temperature=0.0),
                                      prompt_token_ids=prompts[req])
            ctx = len(prompts[req]) + len(out[req]) - 1 if out[req] else 0
            step.rows.add(req_id=req, num_tokens=len(toks), context_len=ctx, state_slot=slots[req],
                          block_table=blocks[req], sample=True)
            step.token_ids.extend(toks)
        result = runner.execute(step)
        assert not result.error, result.error
        for req, token in zip(result.req_ids, result.token_ids):
            out[req].append(token)
    return out


@pytest.mark.parametrize("wgmma", [False, True], ids=["mma_sync_gpu", "wgmma_gpu"])
@pytest.mark.parametrize("rows", [33, 48, 64, 100, 128], ids=lambda m: f"M{m}")
def test_linear_routes_32_to_128_rows(rows, wgmma, monkeypatch):
    """worker.layers.linear: 32 < M <= 128 rows go to the wgmma GEMM where it serves (Hopper), else as 32-row GEMV
    chunks; either way they equal the dense dequantized product."""
    from bench.gpu_model import random_nvfp4
    from kernels.nvfp4 import ops as nvfp4_ops
    from worker.layers import linear as linear_mod

    monkeypatch.setattr(nvfp4_ops, "GEMM_WGMMA", wgmma)
    weight = random_nvfp4(1000, 512)
    x = torch.randn(rows, 512, device="cuda").bfloat16()
    calls = []
    original = linear_mod.chunked_gemv
    linear_mod.chunked_gemv = lambda *a: calls.append(1) or original(*a)
    try:
        got = linear_mod.Linear(weight)(x)
    finally:
        linear_mod.chunked_gemv = original
    assert bool(calls) != nvfp4_ops.wgmma_serves(x.device), "chunked GEMV exactly where the wgmma GEMM does not serve"
    want = x.float() @ weight.dequantize(torch.float32).t()
    assert torch.isfinite(got).all() and got.shape == (rows, 1000)
    err = ((got.float() - want).norm() / want.norm()).item()
    assert err < 1e-2 and not math.isnan(err), err
