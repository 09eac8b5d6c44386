"""Worker process (GPU path): piecewise CUDA graphs of prefill and mixed steps.

An eager prefill step issues ~1,050 launches from Python, ~100 us of host time each on the H200 machine's CPU: a
512-token step of the 27B shape took 86-111 ms of host time for 45 ms of kernels, so TTFT followed the host
(worker/GPU_NOTES.md, session 15). Most of those launches are per-token work whose launch grid depends only on the
token count T: the norms, the NVFP4 GEMMs (and their x permutes), silu_mul, the gated norm, the attention output
gate. What depends on how the step's tokens split into rows (the GDN conv and chunked delta rule, the attention
prologue's cache writes and the attention itself) is each mixer's `core`. As vLLM's piecewise graphs do, the
per-token work between two cores is one graph per padded token count P (SIZES); the cores run eagerly between:

    graph 0: embedding, layer 0 head (norm, projections) | core 0 | graph 1: layer 0 tail (gated norm or output gate,
    out_proj, residual norm, MLP), layer 1 head | core 1 | ... | graph L: layer L-1 tail; then eagerly the last
    tokens' final norm and LM head (Qwen3_5ForCausalLM.finish).

Static buffers (outside the graphs' memory pool, shared by every P and every layer of a kind): token ids [Pmax]
int64, each projection launch's output [Pmax, width] bf16 per mixer kind, the core output [Pmax, *core_shape] bf16
per kind. Rows T..P are padding: per-token work on stale values that no real row reads. The graphs of all P share
one memory pool (captured in order; only the last graph's (x, h) stay referenced).
Used for steps of MIN_TOKENS <= T <= max(SIZES) tokens that the decode graphs (worker/graphs.py) do not serve, on
models DecodeGraphs.capturable accepts: a short prompt, or the few new tokens of a prompt the prefix cache holds, beside
decode rows or alone. Eager, a 16-token prompt of the 27B shape took 94-104 ms (the scheduler's prefill time, served
C = 1) against 28 ms for 128 tokens through the pieces (session 27, device run 1). ENV_FLAG=0 turns it off.
"""
import contextlib
import time

import torch

from worker.graphs import DecodeGraphs, enabled, warm_up_on_side_stream

ENV_FLAG = "SPARKINFER_PREFILL_GRAPHS"
DEFAULT_ON = "1"
MIN_TOKENS = 1  # every step the decode graphs do not serve; at 1-16 tokens the GEMMs are GEMVs (as in decode graphs)
SIZES = (8, 16, 32, 48, 64, 96, 128, 192, 256, 320, 384, 448, 512, 640, 768, 896, 1024)


def _kind(layer) -> str:
    return "attention" if layer.is_attention else "gdn"


class PrefillGraphs:
    """Captures (lazily, per padded token count) and replays the per-token pieces of `model`'s step over `cache`.
    capture False: the same pieces, padding and static buffers, run eagerly (any device; what the CPU tests check
    against model.forward)."""

    def __init__(self, model, cache, capture: bool = True, verbose: bool = True):
        self.model, self.cache, self.capture, self.verbose = model, cache, capture, verbose
        self.sizes, self.device = list(SIZES), cache.device
        top, dtype = self.sizes[-1], model.embed_tokens.dtype
        self.ids = torch.zeros(top, dtype=torch.int64, device=self.device)
        first = {_kind(layer): layer.mixer for layer in reversed(model.layers)}
        self.proj = {k: [torch.zeros(top, w, dtype=dtype, device=self.device) for w in m.projection_widths()]
                     for k, m in first.items()}
        self.core = {k: torch.zeros(m.core_shape(top), dtype=dtype, device=self.device) for k, m in first.items()}
        self.pool = torch.cuda.graph_pool_handle() if capture else None
        self.graphs = {}  # P -> (graphs [L + 1], what each made: proj views per layer, then (x, h) [P, D])

    @staticmethod
    def create(model, cache, on: bool = None, verbose: bool = True):
        """PrefillGraphs when `on` (None: `enabled`) and the model can be captured piecewise, else None."""
        on = enabled(cache.device, flag=ENV_FLAG, default=DEFAULT_ON) if on is None else on
        if not on or cache.device.type != "cuda" or not DecodeGraphs.capturable(model) or not same_kinds(model):
            return None
        return PrefillGraphs(model, cache, True, verbose)

    def serves(self, num_tokens: int) -> bool:
        """A step of num_tokens tokens (not served by the decode graphs) runs here: MIN_TOKENS .. max(SIZES)."""
        return MIN_TOKENS <= num_tokens <= self.sizes[-1]

    @torch.inference_mode()
    def forward(self, batch) -> torch.Tensor:
        """batch: a ForwardBatch on the cache's device. As model.forward: resets fresh slots, runs the step (graphs
        and eager cores), returns logits [M, V] float32 of batch.logits_rows. ValueError past max(SIZES) tokens."""
        model, cache = self.model, self.cache
        host, num_tokens = batch.host_rows(), batch.input_ids.shape[0]
        if num_tokens > self.sizes[-1]:
            raise ValueError(f"PrefillGraphs: {num_tokens} tokens, at most {self.sizes[-1]}")
        cache.reset_fresh(host.state_slots, host.context_lens)
        step = model.prepare(batch, cache.block_size)
        size = next(s for s in self.sizes if s >= num_tokens)
        if self.capture and size not in self.graphs:
            self._capture(size)
        self.ids[:num_tokens].copy_(step.input_ids)
        pieces = self._replayed(size) if size in self.graphs else self._run_pieces(size)
        for i, layer in enumerate(model.layers):
            rows = tuple(t[:num_tokens] for t in next(pieces))
            buf = self.core[_kind(layer)][:num_tokens]  # the cores write here where they can (no copy launch)
            core = layer.mixer.core(rows, *model.core_args(i, step, cache), out=buf)
            if core.data_ptr() != buf.data_ptr():
                buf.copy_(core)
        x, residual = next(pieces)
        return model.finish(x[:num_tokens], residual[:num_tokens], batch.last_token_index())

    def _piece(self, i: int, size: int, residual, projs: list) -> tuple:
        """Graph i's work at P = size: layer i - 1's tail (or the embedding for i = 0), then layer i's head (none
        for i = L). -> (x or None, h, proj of layer i or None)."""
        layers = self.model.layers
        if i == 0:
            x = torch.nn.functional.embedding(self.ids[:size], self.model.embed_tokens)
        else:
            prev = layers[i - 1]
            x, residual = prev.tail(self.core[_kind(prev)][:size], projs[i - 1], residual)
        if i == len(layers):
            return x, residual, None
        outs = [b[:size] for b in self.proj[_kind(layers[i])]]
        proj, residual = layers[i].head(x, residual, outs)
        return None, residual, proj

    def _run_pieces(self, size: int, graphs=None):
        """Runs the pieces in order (each captured into graphs[i] when given), one per next(): yields layer i's proj
        for i < L (its core must run before the next piece reads the core buffer), then the last piece's (x, h)."""
        projs, residual, last = [], None, len(self.model.layers)
        for i in range(last + 1):
            with contextlib.nullcontext() if graphs is None else torch.cuda.graph(graphs[i], pool=self.pool):
                x, residual, proj = self._piece(i, size, residual, projs)
            projs.append(proj)
            yield proj if i < last else (x, residual)

    def _replayed(self, size: int):
        """_run_pieces of a captured size: each next() replays the next graph and yields what that piece made."""
        graphs, made = self.graphs[size]
        for graph, out in zip(graphs, made):
            graph.replay()
            yield out

    @torch.inference_mode()
    def _capture(self, size: int) -> None:
        """Warms the pieces up once eagerly on a side stream (kernels compiled, GEMM scratch grown for P), then
        captures them. Nothing but the static buffers and the pool is written (cores do not run)."""
        t0 = time.perf_counter()
        warm_up_on_side_stream(self.device, lambda: list(self._run_pieces(size)))
        graphs = [torch.cuda.CUDAGraph() for _ in range(len(self.model.layers) + 1)]
        made = list(self._run_pieces(size, graphs))
        torch.cuda.synchronize(self.device)
        self.graphs[size] = (graphs, made)
        if self.verbose:
            print(f"cuda graph: captured prefill pieces tokens={size} ({len(graphs)} graphs) in "
                  f"{time.perf_counter() - t0:.2f} s", flush=True)

    def capture_all(self) -> None:
        """Captures every size (at start, with progress printed)."""
        for size in self.sizes:
            if size not in self.graphs:
                self._capture(size)


def same_kinds(model) -> bool:
    """Every layer of a kind (attention, GDN) has the same projection widths and core shape: the static buffers are
    shared by them."""
    kinds = {}
    for layer in model.layers:
        shape = (tuple(layer.mixer.projection_widths()), layer.mixer.core_shape(1))
        if kinds.setdefault(_kind(layer), shape) != shape:
            return False
    return True
