"""Worker process (GPU path): CUDA graphs of the all-decode step, one per (padded row count, key-width bucket).

Letters as worker/batch.py: N decode rows of the step, P padded rows (PADDED_SIZES), Wb blocks per row in the graph's
static block table (a power of two, >= MIN_KEYS / block_size), W = Wb * block_size keys, V vocabulary.
An eager step issues ~3,400 launches from Python (70-107 ms for the 27B shape); the replayed graph runs the same
kernels back to back (12.5 ms at C = 1, worker/GPU_NOTES.md). Only steps whose rows all decode one token replay;
prefill and mixed steps run eagerly. Static inputs per graph: token ids [P] int64, positions [P] int64, GDN slots
[P] int32, block tables [P, Wb] int64; the attention metadata (slot_mapping, key_index / key_valid [P, W]) and the
RoPE tables are computed inside the graph from them. Padding rows: slot -1 (the GDN decode kernels skip the row,
kernels/gdn/ops.py), position 0 and a dummy KV block (one block appended to every K/V pool, past
cache.num_blocks, so the scheduler never hands it out). Sampling stays outside the graph.
Requires a bf16 model on CUDA whose GDN layers all run the CUDA kernels (128-wide heads); else DecodeGraphs.create
returns None and every step runs eagerly.
"""
import os
import time

import torch

from worker.layers.gdn_meta import GdnStepMeta
from worker.layers.moe import SparseMoeBlock
from worker.layers.paged_attention import PagedStepMeta
from worker.models.qwen3_5 import StepInputs

ENV_FLAG = "SPARKINFER_CUDA_GRAPHS"
# Default for ENV_FLAG on CUDA: on since run 3 on the H200 (worker/GPU_NOTES.md): tests/kernels/
# test_runner_graphs_gpu.py gave the eager greedy tokens over 18 graph steps (the ModelRunner-level test there was
# skipped: no protoc on that machine); SPARKINFER_CUDA_GRAPHS=0 turns graphs off
DEFAULT_ON = "1"
MIN_KEYS = 256


def padded_sizes(max_rows: int) -> list:
    """Row counts that get a graph: 1, 2, 4, 8, 16, 24, 32, then steps of 16 to 128, then of 32, and max_rows."""
    sizes = [1, 2, 4, 8, 16, 24, 32] + list(range(48, 129, 16))
    sizes += list(range(160, max_rows + 1, 32))
    return sorted({s for s in sizes if s < max_rows} | {max_rows})


def enabled(device, environ=None, flag: str = ENV_FLAG, default: str = DEFAULT_ON) -> bool:
    """Graphs (`flag`'s kind: the decode graphs by default) are on for a CUDA device when `flag` (default `default`)
    is "1"; never on CPU."""
    environ = os.environ if environ is None else environ
    return torch.device(device).type == "cuda" and environ.get(flag, default) == "1"


def warm_up_on_side_stream(device, run) -> None:
    """Runs run() once on a side stream ordered after the current stream's work, and the current stream after it:
    the eager pass before a capture (compiles kernels, grows workspaces) without touching the capture stream."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream(device).wait_stream(side)


def _add_dummy_block(cache) -> int:
    """Appends one zero block to every K/V pool (a write-only sink for padding rows); returns its id."""
    for pools in (cache.k_cache, cache.v_cache):
        for j, pool in enumerate(pools):
            pools[j] = torch.cat([pool, pool.new_zeros((1,) + tuple(pool.shape[1:]))])
    return cache.num_blocks


class DecodeGraphs:
    """Captures (lazily, on first use of each key) and replays the all-decode step of `model` over `cache`."""

    def __init__(self, model, cache, max_rows: int, verbose: bool = True):
        self.model, self.cache, self.verbose = model, cache, verbose
        self.device = cache.device
        self.sizes = padded_sizes(max_rows)
        self.max_keys = model.config.max_model_len
        self.dummy_block = _add_dummy_block(cache)
        model.rotary.to(self.device)  # cos/sin are computed inside the graph from the static positions
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs = {}  # (P, Wb) -> (CUDAGraph, static inputs dict, logits [P, V] float32)

    @staticmethod
    def create(model, cache, max_rows: int, on: bool = None, verbose: bool = True):
        """DecodeGraphs when `on` (None: from the environment, `enabled`) and the model can be captured, else None."""
        on = enabled(cache.device) if on is None else on
        if not on or cache.device.type != "cuda" or not DecodeGraphs.capturable(model):
            return None
        return DecodeGraphs(model, cache, max_rows, verbose)

    @staticmethod
    def capturable(model) -> bool:
        """bf16 on CUDA, every GDN layer on the CUDA kernels (the plain-torch GDN ops read slots on the host) and
        no MoE MLP (inside a graph the MoE block would run every expert on every token: E times the work)."""
        probe = model.embed_tokens[:0]
        if not probe.is_cuda or probe.dtype != torch.bfloat16:
            return False
        if any(isinstance(layer.mlp, SparseMoeBlock) for layer in model.layers):
            return False
        return all(layer.is_attention or layer.mixer.uses_kernels(probe) for layer in model.layers)

    def key(self, num_rows: int, max_context_len: int):
        """(P, Wb) of a step of num_rows decode rows whose longest context is max_context_len; None if too big."""
        needed = max(MIN_KEYS, max_context_len + 1)
        if num_rows > self.sizes[-1] or needed > self.max_keys:
            return None
        rows = next(s for s in self.sizes if s >= num_rows)
        blocks = 1 << (-(-needed // self.cache.block_size) - 1).bit_length()
        return rows, blocks

    def serves(self, seq_lens: list, context_lens: list) -> bool:
        """Host lists of the step's rows: every row decodes one token and a graph key exists."""
        if not seq_lens or any(n != 1 for n in seq_lens):
            return False
        return self.key(len(seq_lens), max(context_lens)) is not None

    @torch.inference_mode()
    def forward(self, batch, context_lens: list) -> torch.Tensor:
        """batch: an all-decode ForwardBatch on the device; context_lens its host list. Resets fresh slots, fills the
        static inputs, replays. Returns logits [M, V] float32 of batch.logits_rows (a fresh tensor)."""
        num_rows = len(context_lens)
        key = self.key(num_rows, max(context_lens))
        if key not in self.graphs:
            self._capture(key)
        graph, buf, logits = self.graphs[key]
        self.cache.reset_fresh(batch.host_rows().state_slots, context_lens)
        self._fill(buf, batch, num_rows)
        graph.replay()
        return logits[batch.logits_rows]

    def _fill(self, buf: dict, batch, num_rows: int) -> None:
        """Copies the step's rows into the static inputs; rows past num_rows become padding."""
        width = min(batch.block_tables.shape[1], buf["tables"].shape[1])
        buf["ids"][:num_rows].copy_(batch.input_ids)
        buf["pos"][:num_rows].copy_(batch.positions)
        buf["slots"][:num_rows].copy_(batch.state_slots)
        tables = buf["tables"]
        tables.fill_(self.dummy_block)
        tables[:num_rows, :width].copy_(batch.block_tables[:, :width])
        if num_rows < tables.shape[0]:
            buf["ids"][num_rows:].zero_()
            buf["pos"][num_rows:].zero_()
            buf["slots"][num_rows:].fill_(-1)

    def _static_inputs(self, rows: int, blocks: int) -> dict:
        dev = self.device
        return {"ids": torch.zeros(rows, dtype=torch.int64, device=dev),
                "pos": torch.zeros(rows, dtype=torch.int64, device=dev),
                "slots": torch.full((rows,), -1, dtype=torch.int32, device=dev),
                "tables": torch.full((rows, blocks), self.dummy_block, dtype=torch.int64, device=dev),
                "rows": torch.arange(rows, device=dev),
                "cu": torch.arange(rows + 1, dtype=torch.int32, device=dev),
                "key_pos": torch.arange(blocks * self.cache.block_size, device=dev)}

    def _step(self, buf: dict) -> StepInputs:
        """The step's StepInputs from the static inputs, device ops only (runs inside the graph)."""
        bs, pos, rows = self.cache.block_size, buf["pos"], buf["rows"]
        # a -1 entry (past a row's need) would index the last block: send it to the dummy block
        tables = torch.where(buf["tables"] < 0, self.dummy_block, buf["tables"])
        key_pos = buf["key_pos"]
        key_valid = key_pos[None, :] <= pos[:, None]  # keys 0..pos: the context and this token
        key_index = torch.where(key_valid, tables[:, key_pos // bs] * bs + key_pos % bs, 0)
        slot_mapping = tables[rows, pos // bs] * bs + pos % bs
        attn = PagedStepMeta(slot_mapping, rows, key_index, key_valid, [], True, tables, (pos + 1).int(),
                             key_pos.numel())
        empty = rows[:0]
        gdn = GdnStepMeta(rows, buf["slots"], empty, buf["cu"][:1], buf["slots"][:0], buf["slots"][:0], None,
                          True, False)
        cos, sin = self.model.rotary.cos_sin(pos, self.model.embed_tokens.dtype)
        return StepInputs(buf["ids"], cos, sin, attn, gdn, buf["cu"], buf["slots"].long())

    @torch.inference_mode()
    def _capture(self, key) -> None:
        """Warms the step up once eagerly on a side stream (compiles kernels, fills caches and workspaces), then
        captures it into the shared memory pool. All rows are padding while capturing: nothing live is written."""
        t0 = time.perf_counter()
        buf = self._static_inputs(*key)
        warm_up_on_side_stream(self.device, lambda: self.model.run(self._step(buf), self.cache, None))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            logits = self.model.run(self._step(buf), self.cache, None)
        torch.cuda.synchronize(self.device)
        self.graphs[key] = (graph, buf, logits)
        if self.verbose:
            print(f"cuda graph: captured decode step rows={key[0]} keys={key[1] * self.cache.block_size} "
                  f"in {time.perf_counter() - t0:.2f} s ({len(self.graphs)} graphs)", flush=True)

    def capture_all(self, max_context_len: int = MIN_KEYS - 1) -> None:
        """Captures every padded size at the smallest key width (at start, with progress printed)."""
        for rows in self.sizes:
            key = self.key(rows, max_context_len)
            if key is not None and key not in self.graphs:
                self._capture(key)


def forward_step(model, cache, batch, graphs, seq_lens: list, context_lens: list, prefill=None) -> torch.Tensor:
    """One step's logits [M, V] float32: a decode graph replay when `graphs` serves it, else the piecewise prefill
    graphs (worker/prefill_graphs.py) when `prefill` serves its token count, else the eager model.forward."""
    if graphs is not None and graphs.serves(seq_lens, context_lens):
        return graphs.forward(batch, context_lens)
    if prefill is not None and prefill.serves(sum(seq_lens)):
        return prefill.forward(batch)
    return model.forward(batch, cache)
