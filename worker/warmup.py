"""Worker process (GPU path): a step of each 2..WARM_MAX_TOKENS tokens runs once before the worker reports ready, so
that the kernels such a step picks by its row count are compiled (NVRTC, ~1 s a module on the H200 machine) before a
request needs them.

The decode graphs (worker/graphs.py) and the piecewise prefill graphs (worker/prefill_graphs.py) compile what they
capture at start (worker.server.capture_at_start), but not the mixers' cores, which the piecewise step runs eagerly
between its graphs; where the prefill graphs are off, steps of 2..16 tokens that are not all decode (a few decode rows
beside a short prefill chunk) run eagerly, and their NVFP4 GEMV variants are chosen per row count
(kernels/nvfp4/gemv_pick.py). Served 27B shape at C = 8 on a fresh kernel cache: one such step (7 decode rows + a
4-token chunk) took 1.16 s of host time in the middle of a run (worker/GPU_NOTES.md, session 15).

Safe at start only: nothing is live, so the steps use slots 0.. and blocks 0.. freely (a fresh row resets its slot
before use, and a request writes a position's K/V before it reads it).
"""
import time

import torch

from worker.batch import ForwardBatch
from worker.graphs import forward_step

CONTEXT = 16  # tokens of (garbage) context each decode row attends to
WARM_MAX_TOKENS = 16  # the decode graphs' largest batch; past it a step's GEMMs no longer pick per row count


def warm_up_rows(num_tokens: int, block_size: int) -> list:
    """ForwardBatch.from_rows rows of a num_tokens-token mixed step (num_tokens >= 2): num_tokens - 2 decode rows at
    CONTEXT, then one fresh 2-token prefill row; row i on slot i and its own blocks."""
    per_row = -(-(CONTEXT + 1) // block_size)
    rows = [([1], CONTEXT, i, list(range(i * per_row, (i + 1) * per_row)), True) for i in range(num_tokens - 2)]
    first = (num_tokens - 2) * per_row
    rows.append(([1, 2], 0, num_tokens - 2, list(range(first, first + per_row)), True))
    return rows


def warm_up_eager(runner, verbose: bool = True) -> int:
    """Runs one mixed step for each token count 2..WARM_MAX_TOKENS (as forward_step serves it) on a CUDA
    runner, up to the count whose rows the cache's slots and blocks still hold; returns the number of steps run (0
    on CPU)."""
    cache = runner.cache
    if cache.device.type != "cuda":
        return 0
    t0, sizes = time.perf_counter(), []
    for n in range(2, WARM_MAX_TOKENS + 1):
        rows = warm_up_rows(n, cache.block_size)
        if len(rows) > cache.num_slots or rows[-1][3][-1] >= cache.num_blocks:
            break  # the next counts need more still
        batch = ForwardBatch.from_rows(rows, cache.block_size).to(cache.device)
        forward_step(runner.model, cache, batch, runner.graphs, [len(r[0]) for r in rows], [r[1] for r in rows],
                     runner.prefill_graphs)
        sizes.append(n)
    torch.cuda.synchronize(cache.device)
    if verbose and sizes:
        print(f"worker: steps of {sizes[0]}-{sizes[-1]} tokens warmed up in {time.perf_counter() - t0:.1f} s",
              flush=True)
    return len(sizes)
