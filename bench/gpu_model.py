"""GPU bench (run on the device by `make bench-gpu`): one decode step of the 27B-shaped model vs its roofline.

The model (Qwen3.8-27B shape, design.md section 1) is built on the GPU with random weights (NVFP4 Linears: random
codes, e4m3 block scales in [0.5, 2], a global scale that keeps activations O(1); bf16 embeddings and norms).
One step: C rows each decoding one token at context CTX on shuffled GDN slots and KV blocks. Per C: step time eager
and as a CUDA-graph replay (CUDA events, median), tokens/s = C / step, the bytes a step must move (NVFP4 weights
incl. the LM head, GDN recurrent + conv state read and written, KV read), the roofline = bytes / copy bandwidth
measured in the same run, and the fraction reached. Variants (VARIANTS): "before" = GEMM for M > 32 rows and torch
norms; "+gemv" = 32 < M <= 128 rows as 32-row GEMV chunks (worker/layers/linear.py); "+gemv+norms" = also the fused
norm / SiLU-mul kernels (kernels/norm, worker.layers.norm.USE_KERNELS). f32 GDN state (GPU_MODEL_STATE=bfloat16:
bf16). CSV to $OUT when set.
Env: GPU_MODEL_LAYERS (64), GPU_MODEL_BUDGET_S (240: later cases are skipped past it), GPU_MODEL_CTX (256),
GPU_MODEL_BATCHES ("1,64": only these C of the first variant); GPU_MODEL_DECODE_AB, _PDL_AB, _TMA_AB, _AHEAD_AB: A/B
rows of the first variant (bench/gpu_model_ab.py).
"""
import math
import os
import time

import torch

from bench import gpu_model_ab

from bench.cuda_timing import median_ms
from bench.model_report import print_table, write_outputs
from bench.step_profile import profile_kernels
from kernels.nvfp4 import ops as nvfp4_ops
from kernels.nvfp4.checkpoint import NVFP4Weight
from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.config import ModelConfig
from worker.layers import linear as linear_layer
from worker.layers import norm as norm_layer
from worker.models.qwen3_5 import Qwen3_5ForCausalLM
from worker.models.qwen3_5_weights import tensor_shapes

BATCHES = (1, 2, 4, 8, 16, 32, 64)
# (label, fused norms, chunked GEMV for 32 < M <= 128 (else the GEMM: wgmma on Hopper), modes, batch sizes); run 2
# of worker/GPU_NOTES.md measured "before" (mma.sync GEMM for M > 32, torch norms) and the eager steps already,
# session 2 the GEMV's v2 flush (kernels/nvfp4/NOTES.md, run 7)
VARIANTS = (("+wgmma", True, False, ("graph",), (1, 8, 32, 48, 64)),
            ("+gemv+norms", True, True, ("graph",), (48, 64)))
CTX = int(os.environ.get("GPU_MODEL_CTX", "256"))
# GPU_MODEL_BATCHES="1,64": only these C, first variant only
ONLY_BATCHES = tuple(int(c) for c in os.environ.get("GPU_MODEL_BATCHES", "").split(",") if c)
PROFILE_TOP = int(os.environ.get("GPU_MODEL_PROFILE_TOP", "6"))  # kernels listed per profiled step
# GDN recurrent state dtype of the sweeps and profiles (GPU_MODEL_STATE=bfloat16: the worker's bf16 option)
STATE_DTYPE = getattr(torch, os.environ.get("GPU_MODEL_STATE", "float32"))
BLOCK = 16
T0 = time.time()
LAYERS = int(os.environ.get("GPU_MODEL_LAYERS", "64"))
DEVICE = "cuda"  # the CPU smoke check (tests nothing of speed) swaps this


def set_variant(fused_norms: bool, chunked_gemv: bool) -> None:
    """Switches the fused norms and the row-chunked GEMV routing for 32 < M <= 128 with the mma.sync GEMM above
    (else every M > 32 through the GEMM: wgmma on Hopper)."""
    norm_layer.USE_KERNELS = fused_norms
    linear_layer.CHUNKED_GEMV_MAX_M = 128 if chunked_gemv else nvfp4_ops.GEMV_MAX_M
    nvfp4_ops.GEMM_WGMMA = not chunked_gemv  # the chunked GEMV serves only where the wgmma GEMM does not


def config_27b(num_layers: int) -> ModelConfig:
    types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(num_layers)]
    return ModelConfig(model_type="qwen3_5_text", architecture="Qwen3_5ForCausalLM", vocab_size=248320,
                       hidden_size=5120, intermediate_size=17408, num_hidden_layers=num_layers,
                       num_attention_heads=24, num_key_value_heads=4, head_dim=256, linear_num_key_heads=16,
                       linear_num_value_heads=48, linear_key_head_dim=128, linear_value_head_dim=128,
                       linear_conv_kernel_dim=4, layer_types=types)


def random_nvfp4(n: int, k: int) -> NVFP4Weight:
    """Random codes, e4m3 scales in [0.5, 2] and gmul so that W has std ~ 1/sqrt(k) (E[e2m1^2] = 8.6)."""
    packed = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=DEVICE)
    scale = torch.empty(n, k // 16, device=DEVICE).uniform_(0.5, 2.0).to(torch.float8_e4m3fn)
    gmul = torch.tensor(1.0 / (math.sqrt(8.6) * 1.2 * math.sqrt(k)), device=DEVICE)
    return NVFP4Weight(packed, scale, gmul)


def build(config: ModelConfig):
    """-> (model, NVFP4 weight bytes) with every tensor made on the GPU."""
    tensors, weight_bytes = {}, 0
    for name, shape in tensor_shapes(config).items():
        if len(shape) == 2 and name != "embed_tokens.weight":  # every Linear (conv1d weights are 3-D)
            tensors[name] = random_nvfp4(*shape)
            weight_bytes += tensors[name].nbytes()
        elif name == "embed_tokens.weight":
            tensors[name] = torch.randn(shape, device=DEVICE, dtype=torch.bfloat16)
        elif name.endswith("A_log"):
            tensors[name] = torch.empty(shape, device=DEVICE).uniform_(0.1, 2.0).log().bfloat16()
        elif name.endswith("linear_attn.norm.weight"):
            tensors[name] = (1.0 + 0.1 * torch.randn(shape, device=DEVICE)).bfloat16()
        else:  # norms (zero-centred), dt_bias, conv weights
            tensors[name] = (0.1 * torch.randn(shape, device=DEVICE)).bfloat16()
    return Qwen3_5ForCausalLM(config, tensors).eval(), weight_bytes


def make_cache(config, state_dtype, max_rows: int = max(BATCHES)) -> ModelCache:
    """KV blocks and state slots for max_rows decode rows at context CTX (random pool contents)."""
    blocks_per_row = -(-(CTX + 1) // BLOCK)
    cache = ModelCache(config, max_rows * blocks_per_row + 8, BLOCK, max_rows + 3, device=DEVICE,
                       dtype=torch.bfloat16, state_dtype=state_dtype)
    for pool in (cache.recurrent_state, cache.conv_state, *cache.k_cache, *cache.v_cache):
        pool.normal_(0.0, 0.05)
    return cache


def decode_batch(num_rows: int, cache: ModelCache, vocab: int) -> ForwardBatch:
    """num_rows decode rows at context CTX on shuffled slots and blocks."""
    gen = torch.Generator().manual_seed(num_rows)
    slots = torch.randperm(cache.num_slots, generator=gen)[:num_rows].tolist()
    blocks = torch.randperm(cache.num_blocks, generator=gen).tolist()
    per_row = -(-(CTX + 1) // BLOCK)
    rows = [([int(torch.randint(0, vocab, (1,), generator=gen))], CTX, slots[r],
             blocks[r * per_row:(r + 1) * per_row], True) for r in range(num_rows)]
    batch = ForwardBatch.from_rows(rows, BLOCK)
    return batch.to(DEVICE)


def copy_bandwidth() -> float:
    """Device-to-device copy bytes/s, counting bytes read plus written (1 GiB buffer)."""
    src = torch.randn(2 ** 28, device=DEVICE)
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), warmup=2, reps=20)
    return 2 * src.numel() * 4 / ms * 1e3


def step_bytes(config: ModelConfig, weight_bytes: int, num_rows: int, state_size: int, ctx: int = CTX) -> dict:
    """The bytes one decode step of num_rows rows at context ctx must move, by kind."""
    num_gdn, num_attn = len(config.gdn_layer_ids), len(config.attention_layer_ids)
    state = config.linear_num_value_heads * config.linear_key_head_dim * config.linear_value_head_dim
    kv_token = 2 * config.num_key_value_heads * config.head_dim * 2
    return {"weights": weight_bytes,
            "gdn_state": 2 * num_gdn * num_rows * state * state_size,
            "conv_state": 2 * num_gdn * num_rows * config.conv_dim * (config.linear_conv_kernel_dim - 1) * 2,
            "kv": num_attn * num_rows * (ctx + 2) * kv_token}


def time_step(model, cache, num_rows: int, use_graph: bool) -> float:
    """Median ms of one decode step (model.run on prepared metadata), eager or as a CUDA-graph replay."""
    batch = decode_batch(num_rows, cache, model.config.vocab_size)
    step, last = model.prepare(batch, BLOCK), batch.last_token_index()
    logits = model.run(step, cache, last)
    torch.cuda.synchronize()
    if not torch.isfinite(logits).all():
        print(f"  warning: non-finite logits at C={num_rows}")
    if not use_graph:
        return median_ms(lambda: model.run(step, cache, last), warmup=2)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model.run(step, cache, last)
    return median_ms(graph.replay, warmup=3, reps=20)


def profile_step(model, cache, num_rows: int) -> None:
    """Kernel time of one eager step by kind (bench/step_profile.py)."""
    batch = decode_batch(num_rows, cache, model.config.vocab_size)
    step, last = model.prepare(batch, BLOCK), batch.last_token_index()
    profile_kernels(lambda: model.run(step, cache, last), f"C={num_rows}", PROFILE_TOP)


def time_runner(model, config, num_rows: int) -> float:
    """Median ms of one all-decode step through the serving graph runner (worker/graphs.py: static-input copies,
    replay, logits gather), sampling excluded."""
    from worker.graphs import DecodeGraphs

    cache = make_cache(config, torch.float32)
    graphs = DecodeGraphs(model, cache, cache.num_slots, verbose=False)
    batch = decode_batch(num_rows, cache, config.vocab_size)
    return median_ms(lambda: graphs.forward(batch, [CTX] * num_rows), warmup=2, reps=20)


def time_prefill(model, cache, num_tokens: int, stream_k: bool) -> float:
    """Median ms of one packed step holding a num_tokens prefill chunk of one sequence from position 0 (the
    scheduler's default chunk is 2048 tokens), eager; stream_k False keeps every GEMM on the launcher's whole-tile /
    split-K pick (streamk.M_RANGE emptied for the call)."""
    from kernels.nvfp4 import streamk

    gen = torch.Generator().manual_seed(num_tokens)
    tokens = torch.randint(0, model.config.vocab_size, (num_tokens,), generator=gen).tolist()
    batch = ForwardBatch.from_rows([(tokens, 0, 0, list(range(-(-num_tokens // BLOCK))), True)], BLOCK)
    batch = batch.to(DEVICE)
    step, last = model.prepare(batch, BLOCK), batch.last_token_index()
    saved = streamk.M_RANGE
    streamk.M_RANGE = saved if stream_k else (1, 0)
    try:
        return median_ms(lambda: model.run(step, cache, last), warmup=2, reps=10)
    finally:
        streamk.M_RANGE = saved


def prefill(model, config) -> None:
    """Prints one prefill chunk's step time at 512 and 2048 tokens, with and without the stream-K GEMMs."""
    cache = make_cache(config, STATE_DTYPE)
    for num_tokens in (512, 2048):
        on, off = (guarded(lambda sk=sk: time_prefill(model, cache, num_tokens, sk), f"prefill {num_tokens}")
                   for sk in (True, False))
        print(f"  prefill chunk of {num_tokens} tokens (one step, eager): {on:.2f} ms with stream-K GEMMs, "
              f"{off:.2f} ms without ({off / on:.2f}x); {num_tokens / on * 1e3:.0f} tok/s", flush=True)


def guarded(fn, what: str) -> float:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - report and go on with the other cases
        print(f"  ({what} failed: {type(exc).__name__}: {str(exc)[:400]})", flush=True)
        torch.cuda.synchronize()
        return float("nan")


def sweep(model, config, weight_bytes, bandwidth, state_dtype, modes, budget_s, batches=BATCHES,
          label="") -> list:
    cache = make_cache(config, state_dtype, max(max(batches), max(BATCHES)))
    state_size = torch.empty((), dtype=state_dtype).element_size()
    rows = []
    for num_rows in batches:
        if time.time() - T0 > budget_s:
            print(f"  budget reached: skipping C={num_rows} and above ({state_dtype})")
            break
        parts = step_bytes(config, weight_bytes, num_rows, state_size)
        total = sum(parts.values())
        row = {"state": label.strip() or str(state_dtype).split(".")[-1], "C": num_rows, "bytes": total, **parts,
               "roofline_ms": total / bandwidth * 1e3}
        for mode in modes:
            ms = guarded(lambda: time_step(model, cache, num_rows, mode == "graph"), f"{mode} C={num_rows}")
            row.update({f"{mode}_ms": ms, f"{mode}_tok_s": num_rows / ms * 1e3,
                        f"{mode}_frac": row["roofline_ms"] / ms})
        print(f"  {row['state']} C={num_rows}: " + ", ".join(f"{m} {row[f'{m}_ms']:.2f} ms" for m in modes)
              + f", roofline {row['roofline_ms']:.2f} ms  [{time.time() - T0:.0f} s]", flush=True)
        rows.append(row)
    return rows


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return 0
    budget = float(os.environ.get("GPU_MODEL_BUDGET_S", "240"))
    print(torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    bandwidth = copy_bandwidth()
    config = config_27b(LAYERS)
    model, weight_bytes = build(config)
    torch.cuda.synchronize()
    print(f"built {LAYERS} layers on the GPU: NVFP4 weights {weight_bytes / 1e9:.2f} GB "
          f"[{time.time() - T0:.0f} s]; GPU memory {torch.cuda.memory_allocated() / 1e9:.1f} GB", flush=True)
    prefill(model, config)
    torch.cuda.empty_cache()
    rows = []
    for label, norms, chunked, modes, batches in VARIANTS:
        if ONLY_BATCHES:
            if label != VARIANTS[0][0]:
                break
            batches = ONLY_BATCHES
        set_variant(norms, chunked)
        args = (model, config, weight_bytes, bandwidth, STATE_DTYPE, modes, budget)
        rows += sweep(*args, batches, " " + label)
        if label == VARIANTS[0][0]:
            rows += gpu_model_ab.ab_sweeps(sweep, args, batches, label)
    set_variant(True, False)
    for num_rows in (1, 64):
        if time.time() - T0 < budget + 10:
            ms = guarded(lambda: time_runner(model, config, num_rows), f"runner C={num_rows}")
            print(f"  serving graph runner (+gemv+norms) C={num_rows}: {ms:.2f} ms per step", flush=True)
    if time.time() - T0 < budget + 20:
        cache = make_cache(config, STATE_DTYPE)
        for num_rows in (1, 64):
            guarded(lambda: profile_step(model, cache, num_rows), f"profile C={num_rows} (+gemv+norms)")
        del cache
    write_outputs(rows, os.environ.get("OUT"))
    print_table(rows, bandwidth, f"{LAYERS} layers, ctx {CTX}, {str(STATE_DTYPE).split('.')[-1]} GDN state")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
