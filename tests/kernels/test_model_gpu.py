"""GPU tests: the model forward on CUDA (GDN kernels, vectorized paged attention) equals the CPU fp32 reference.

Two models: the tiny checkpoint (GDN heads of 32: the plain-torch GDN ops run on the GPU) and a small in-memory
model with the kernels' 128-wide GDN heads (bf16 on the GPU: kernels/gdn CUDA path). Packed batches mix prefill
chunks (one longer than a 64-token chunk) and decode rows on non-contiguous slots and shuffled blocks.
"""
import random

import pytest
import torch

from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.config import ModelConfig
from worker.layers import attention as attention_layer
from worker.loader import load_model
from worker.models.qwen3_5 import Qwen3_5ForCausalLM
from worker.models.qwen3_5_weights import tensor_shapes
from worker.tiny import _init

pytestmark = pytest.mark.gpu
BLOCK = 16
BF16_TOL = 6e-2  # ||gpu - ref|| / ||ref|| of the logits; bf16 activations through 8 layers give ~2e-2 on CPU
FP32_TOL = 1e-4
# (seq, first token, end token) per step; seq -> slot, non-contiguous; step 0 has a 70-token prefill
SCHEDULE = [[(0, 0, 70), (1, 0, 9), (2, 0, 1)],
            [(1, 9, 10), (0, 70, 71), (3, 0, 33), (2, 1, 2)],
            [(2, 2, 3), (3, 33, 50), (0, 71, 72), (1, 10, 11)],
            [(3, 50, 51), (1, 11, 12), (2, 3, 4), (0, 72, 73)]]
SLOTS = {0: 5, 1: 2, 2: 7, 3: 0}


def kernel_config(num_layers: int = 8) -> ModelConfig:
    """A small Qwen3.5 with the 27B's GDN head width (128) so the CUDA kernels serve it."""
    types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(num_layers)]
    return ModelConfig(model_type="qwen3_5_text", architecture="Qwen3_5ForCausalLM", vocab_size=512,
                       hidden_size=256, intermediate_size=512, num_hidden_layers=num_layers, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=64, linear_num_key_heads=2, linear_num_value_heads=4,
                       linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
                       layer_types=types, max_position_embeddings=4096)


def build(config: ModelConfig, dtype, device) -> Qwen3_5ForCausalLM:
    tensors = {name: _init(name, shape).to(device=device, dtype=dtype) for name, shape in tensor_shapes(config).items()}
    return Qwen3_5ForCausalLM(config, tensors).eval()


@pytest.fixture(scope="module")
def kernel_models():
    config = kernel_config()
    return config, build(config, torch.float32, "cpu"), build(config, torch.bfloat16, "cuda")


@pytest.fixture(scope="module")
def kernel_reference(kernel_models):
    """CPU fp32 logits of SCHEDULE on the kernel-shaped model (computed once)."""
    config, ref, _ = kernel_models
    ids, blocks = _schedule_inputs(config.vocab_size)
    return _run_schedule(ref, _cache(config, "cpu", torch.float32), ids, blocks, "cpu")


def _cache(config, device, dtype, state_dtype=torch.float32):
    return ModelCache(config, num_blocks=64, block_size=BLOCK, num_slots=8, device=device, dtype=dtype,
                      state_dtype=state_dtype)


def _rel(got, want) -> float:
    return ((got.float().cpu() - want).norm() / want.norm()).item()


def _run_schedule(model, cache, ids, blocks, device):
    """Runs SCHEDULE; returns each step's logits [rows, V] float32 on the CPU."""
    out = []
    for step in SCHEDULE:
        rows = [(ids[n][lo:hi], lo, SLOTS[n], blocks[n], True) for n, lo, hi in step]
        batch = ForwardBatch.from_rows(rows, BLOCK)
        batch = batch.to(device)
        logits = model(batch, cache)
        assert not torch.isnan(logits).any()
        out.append(logits.cpu())
    return out


def _schedule_inputs(vocab_size):
    ids = {n: torch.randint(0, vocab_size, (80,), generator=torch.Generator().manual_seed(40 + n)).tolist()
           for n in SLOTS}
    free = random.Random(9).sample(range(64), 64)
    return ids, {n: [free.pop() for _ in range(6)] for n in SLOTS}


@pytest.mark.parametrize("decode_kernel", ["1", "0"], ids=["paged_decode_kernel", "torch_decode"])
@pytest.mark.parametrize("state_dtype", [torch.float32, torch.bfloat16], ids=["state_f32", "state_bf16"])
def test_kernel_model_mixed_batches_match_cpu_fp32(kernel_models, kernel_reference, state_dtype, decode_kernel,
                                                   monkeypatch):
    # the decode rows of the mixed steps through the paged decode kernel (forced: these steps have under 8 decode
    # rows) and through the torch path
    monkeypatch.setattr(attention_layer, "DECODE_KERNEL", decode_kernel)
    config, _, gpu = kernel_models
    ids, blocks = _schedule_inputs(config.vocab_size)
    want = kernel_reference
    cache = _cache(config, "cuda", torch.bfloat16, state_dtype)
    got = _run_schedule(gpu, cache, ids, blocks, "cuda")
    errs = [_rel(g, w) for g, w in zip(got, want)]
    print(f"kernel model {state_dtype}: per-step logits rel err {['%.2e' % e for e in errs]}")
    assert max(errs) < BF16_TOL, errs
    assert cache.recurrent_state[:, [1, 3, 4, 6]].abs().max() == 0  # unused slots untouched


@pytest.fixture(scope="module")
def tiny_reference(tiny_path):
    """(CPU fp32 model, config, its logits of SCHEDULE)."""
    ref, config = load_model(tiny_path, dtype=torch.float32, progress=False)
    ids, blocks = _schedule_inputs(config.vocab_size)
    return ref, config, _run_schedule(ref, _cache(config, "cpu", torch.float32), ids, blocks, "cpu")


def test_mixed_steps_queue_without_reading_the_device(kernel_models, kernel_reference):
    """A step built by ForwardBatch.from_rows carries its rows' host lists, so model.forward queues all of it
    without one device-to-host read (set_sync_debug_mode("error") raises on any), as the pipelined worker needs to
    launch a step while the one before still runs (worker/pipeline.py); the logits still match the CPU."""
    config, _, gpu = kernel_models
    ids, blocks = _schedule_inputs(config.vocab_size)
    _run_schedule(gpu, _cache(config, "cuda", torch.bfloat16), ids, blocks, "cuda")  # compiles and warms up
    cache, got = _cache(config, "cuda", torch.bfloat16), []
    for step in SCHEDULE:
        rows = [(ids[n][lo:hi], lo, SLOTS[n], blocks[n], True) for n, lo, hi in step]
        batch = ForwardBatch.from_rows(rows, BLOCK).to("cuda", non_blocking=True)
        torch.cuda.set_sync_debug_mode("error")
        try:
            logits = gpu(batch, cache)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        got.append(logits.cpu())
    errs = [_rel(g, w) for g, w in zip(got, kernel_reference)]
    assert max(errs) < BF16_TOL, errs


@pytest.mark.parametrize("dtype,tol", [(torch.float32, FP32_TOL), (torch.bfloat16, BF16_TOL)], ids=["fp32", "bf16"])
def test_tiny_checkpoint_mixed_batches_match_cpu_fp32(tiny_path, tiny_reference, dtype, tol):
    torch.backends.cuda.matmul.allow_tf32 = False
    _, config, want = tiny_reference
    gpu, _ = load_model(tiny_path, device="cuda", dtype=dtype, progress=False)
    ids, blocks = _schedule_inputs(config.vocab_size)
    got = _run_schedule(gpu, _cache(config, "cuda", dtype), ids, blocks, "cuda")
    errs = [_rel(g, w) for g, w in zip(got, want)]
    print(f"tiny checkpoint {dtype}: per-step logits rel err {['%.2e' % e for e in errs]}")
    assert max(errs) < tol, errs


def _greedy(model, config, prompts, device, dtype, steps=32):
    """Prefills every prompt in one packed step, then decodes all rows together for `steps` steps.
    Returns the generated token lists."""
    cache = _cache(config, device, dtype)
    slots, blocks = [6, 1, 3], [[3 + 8 * r + j for j in range(5)] for r in range(3)]
    rows = [(p, 0, s, b, True) for p, s, b in zip(prompts, slots, blocks)]
    seqs = [list(p) for p in prompts]
    for _ in range(steps):
        batch = ForwardBatch.from_rows(rows, BLOCK)
        batch = batch.to(device)
        next_ids = model(batch, cache).argmax(-1).tolist()
        rows = [([t], len(s), sl, b, True) for t, s, sl, b in zip(next_ids, seqs, slots, blocks)]
        for s, t in zip(seqs, next_ids):
            s.append(t)
    return [s[len(p):] for s, p in zip(seqs, prompts)]


def test_greedy_decode_32_tokens_matches_cpu(kernel_models):
    """bf16 on the kernels: each GPU pick is the CPU fp32 argmax of the same prefix or a near tie (bf16 rounding
    can flip a near tie, after which free-running sequences part: so the check is teacher-forced)."""
    config, ref, gpu = kernel_models
    gen = torch.Generator().manual_seed(77)
    prompts = [torch.randint(0, config.vocab_size, (n,), generator=gen).tolist() for n in (20, 7, 33)]
    got = _greedy(gpu, config, prompts, "cuda", torch.bfloat16)
    exact = 0
    for prompt, tokens in zip(prompts, got):
        batch = ForwardBatch.from_rows([(prompt + tokens, 0, 0, list(range(5)), True)], BLOCK)
        logits = ref(batch, _cache(config, "cpu", torch.float32), all_logits=True)[len(prompt) - 1:-1]
        gap = logits.max(-1).values - logits[torch.arange(len(tokens)), torch.tensor(tokens)]
        assert (gap <= 0.03 * logits.abs().max()).all(), gap.max()
        exact += int((logits.argmax(-1) == torch.tensor(tokens)).sum())
    print(f"greedy bf16 kernels: {exact}/{3 * 32} GPU tokens are the CPU fp32 argmax (CPU bf16 gets 92/96)")
    assert exact >= 0.85 * 3 * 32


def test_greedy_decode_32_tokens_fp32_gpu_equals_cpu(tiny_path, tiny_reference):
    torch.backends.cuda.matmul.allow_tf32 = False
    ref, config, _ = tiny_reference
    gpu, _ = load_model(tiny_path, device="cuda", dtype=torch.float32, progress=False)
    gen = torch.Generator().manual_seed(78)
    prompts = [torch.randint(0, config.vocab_size, (n,), generator=gen).tolist() for n in (20, 7, 33)]
    assert _greedy(gpu, config, prompts, "cuda", torch.float32) == _greedy(ref, config, prompts, "cpu", torch.float32)


@pytest.mark.parametrize("decode_kernel", ["1", "0"], ids=["paged_decode_kernel", "torch_decode"])
def test_decode_step_replays_as_cuda_graph(kernel_models, decode_kernel, monkeypatch):
    monkeypatch.setattr(attention_layer, "DECODE_KERNEL", decode_kernel)
    config, _, gpu = kernel_models
    cache = _cache(config, "cuda", torch.bfloat16)
    for t in (cache.recurrent_state, cache.conv_state, *cache.k_cache, *cache.v_cache):
        t.copy_(torch.randn(t.shape, device="cuda") * 0.1)
    rows = [([i + 1], 40 + 3 * i, s, [5 * i + j for j in range(5)], True) for i, s in enumerate([6, 1, 3, 4])]
    batch = ForwardBatch.from_rows(rows, BLOCK)
    batch = batch.to("cuda")
    step = gpu.prepare(batch, BLOCK)
    saved = [t.clone() for t in (cache.recurrent_state, cache.conv_state)]
    eager = gpu.run(step, cache, batch.last_token_index())
    for t, s in zip((cache.recurrent_state, cache.conv_state), saved):
        t.copy_(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = gpu.run(step, cache, batch.last_token_index())
    for t, s in zip((cache.recurrent_state, cache.conv_state), saved):
        t.copy_(s)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert _rel(out, eager.cpu()) < 1e-3
