"""Worker process entry point: loads the model, sizes the KV and GDN state pools, and runs the compute loop.

Run: python -m worker.server --model models/tiny   (flags or SPARKINFER_* env vars)
Socket I/O runs on its own thread (worker/wire.py); this module's main thread only computes steps.
"""
import argparse
import math
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass, fields

# Idle OpenMP threads must sleep, not spin: spinning workers starve the scheduler and gateway processes
# that share the CPU (measured on 2 cores: median inter-token latency 7 ms -> 199 ms). Set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from proto import pb
from proto.frames import split_addr
from proto.wire_version import WIRE_VERSION
from worker.cache import ModelCache
from worker.checkpoint_errors import CheckpointError
from worker.grammar import GrammarBook
from worker.layers.linear import prepack_nvfp4
from worker.loader import load_model
from worker.model_card import load_model_card
from worker.model_runner import MIB, ModelRunner, size_pools
from worker.pipeline import StepPipeline
from worker.switches import switch_problem
from worker.warmup import warm_up_eager
from worker.wire import SchedulerLink

CPU_KV_CACHE_MIB = 128
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
GPU_MEMORY_FRACTION = 0.85
CAPTURE_ENV = "SPARKINFER_CAPTURE_AT_START"  # capture_at_start: "0" leaves every decode graph to its first use


@dataclass
class WorkerConfig:
    model: str = "models/tiny"
    worker_addr: str = "tcp://127.0.0.1:5557"
    device: str = ""
    dtype: str = ""
    num_kv_blocks: int = 0
    num_state_slots: int = 64
    state_dtype: str = "float32"
    block_size: int = 16
    kv_cache_mib: int = 0
    num_threads: int = 0
    sampler_seed: int = 0
    drain_grace_s: float = 30.0

    def describe(self) -> str:
        """One line `worker config: name=value ...` of every field, printed once at start."""
        return "worker config: " + " ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))


# Flag name -> what it sets, for --help (README's Configuration table says the same at more length; % is argparse's).
HELP = {
    "model": "checkpoint folder",
    "worker_addr": "the scheduler's step port; results go to port + 1",
    "device": "torch device; '' = cuda:0 when available, else cpu",
    "dtype": "weights and activations (float32, bfloat16, float16); '' = float32 on cpu, bfloat16 on cuda",
    "num_kv_blocks": "KV blocks; 0 = as many as kv_cache_mib holds",
    "num_state_slots": "GDN state slots = running requests at most",
    "state_dtype": "GDN recurrent state: float32 (exact) or bfloat16 (half the bytes)",
    "block_size": "tokens per KV block",
    "kv_cache_mib": "KV pool budget when num_kv_blocks is 0; 0 = 128 MiB on cpu, 85%% of the GPU memory left after "
                    "weights and state slots",
    "num_threads": "torch CPU threads; 0 = all cores but two (scheduler, gateway), at least 1",
    "sampler_seed": "seed of the generator requests without a seed share; 0 = random",
    "drain_grace_s": "on SIGTERM: serve the scheduler's steps this long at most",
}
ENV_NAMES = {
    "model": "SPARKINFER_MODEL", "worker_addr": "SPARKINFER_WORKER_ADDR", "device": "SPARKINFER_DEVICE",
    "dtype": "SPARKINFER_DTYPE",
    "num_kv_blocks": "SPARKINFER_NUM_KV_BLOCKS", "num_state_slots": "SPARKINFER_NUM_STATE_SLOTS",
    "block_size": "SPARKINFER_BLOCK_SIZE", "kv_cache_mib": "SPARKINFER_KV_CACHE_MIB",
    "num_threads": "SPARKINFER_NUM_THREADS", "sampler_seed": "SPARKINFER_SAMPLER_SEED",
    "state_dtype": "SPARKINFER_GDN_STATE_DTYPE", "drain_grace_s": "SPARKINFER_DRAIN_GRACE_S",
}


def parse_config(argv=None, environ=None) -> WorkerConfig:
    """Flags win over environment variables, which win over the defaults."""
    environ = os.environ if environ is None else environ
    # No usage block before an error: a bad SPARKINFER_* value stops the start with one line (README, Configuration).
    parser = argparse.ArgumentParser(prog="python -m worker.server", usage=argparse.SUPPRESS,
                                     description="SparkInfer worker")
    defaults = WorkerConfig()
    for f in fields(WorkerConfig):
        parser.add_argument("--" + f.name.replace("_", "-"), default=None,
                            help=f"{HELP[f.name]} (env {ENV_NAMES[f.name]}, default {getattr(defaults, f.name)!r})")
    args = parser.parse_args(argv)
    values = {}
    for f in fields(WorkerConfig):
        raw = getattr(args, f.name)
        if raw is None:
            raw = environ.get(ENV_NAMES[f.name])
        try:
            values[f.name] = getattr(defaults, f.name) if raw is None else f.type(raw)
        except ValueError:
            parser.error(f"{f.name} ({ENV_NAMES[f.name]}): {raw!r} is not "
                         f"{'an integer' if f.type is int else 'a number'}")
    config = WorkerConfig(**values)
    for name, (ok, must) in _RULES.items():
        if not ok(getattr(config, name)):
            parser.error(f"{name} ({ENV_NAMES[name]}): {getattr(config, name)!r} {must}")
    problem = _device_problem(config.device)
    if problem:
        parser.error(f"device (SPARKINFER_DEVICE): {config.device!r} {problem}")
    problem = switch_problem(environ)
    if problem:
        parser.error(problem)
    return config


def _valid_addr(addr: str) -> bool:
    try:
        split_addr(addr)
    except ValueError:
        return False
    return True


# Checked at start: a bad value was a traceback after the model had loaded (a dtype, a block size), or was taken
# silently as another (a negative KV budget as the default).
_RULES = {
    "worker_addr": (_valid_addr, "is not tcp://host:port"),
    "dtype": (lambda v: v in ("",) + tuple(_DTYPES), f"is not one of {', '.join(_DTYPES)}"),
    "state_dtype": (lambda v: v in ("float32", "bfloat16"), "is not float32 or bfloat16"),
    "num_kv_blocks": (lambda v: v >= 0, "must be >= 0 (0 = from kv_cache_mib)"),
    "num_state_slots": (lambda v: v > 0, "must be > 0"),
    "block_size": (lambda v: v > 0, "must be > 0"),
    "kv_cache_mib": (lambda v: v >= 0, "must be >= 0 (0 = auto)"),
    "num_threads": (lambda v: v >= 0, "must be >= 0 (0 = all cores but two)"),
    "sampler_seed": (lambda v: 0 <= v < 2 ** 64, "must be in [0, 2^64) (0 = random)"),
    "drain_grace_s": (lambda v: math.isfinite(v) and v >= 0, "must be a number of seconds >= 0"),
}


def _device_problem(name: str) -> str:
    """Why torch cannot run on device `name` ("" = the default), or ""."""
    if not name:
        return ""
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        return "is not a torch device (cpu, cuda, cuda:N)"
    if device.type == "cuda" and not torch.cuda.is_available():
        return "asks for CUDA, which is not available on this machine"
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        return f"is past the {torch.cuda.device_count()} CUDA devices of this machine"
    if device.type not in ("cpu", "cuda"):
        return "is not cpu or cuda"
    return ""


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)


def _kv_cache_bytes(config: WorkerConfig, model_config, device: torch.device, dtype) -> int:
    if config.kv_cache_mib > 0:
        return config.kv_cache_mib * MIB
    if device.type != "cuda":
        return CPU_KV_CACHE_MIB * MIB
    free_bytes = torch.cuda.mem_get_info(device)[0]
    slots_bytes = config.num_state_slots * ModelCache.bytes_per_slot(model_config, dtype, _dtype(config.state_dtype))
    return max(MIB, int(free_bytes * GPU_MEMORY_FRACTION) - slots_bytes)


def _dtype(name: str) -> torch.dtype:
    """torch dtype for a config name; raises ValueError naming the choices."""
    if name not in _DTYPES:
        raise ValueError(f"dtype {name!r} is not one of {sorted(_DTYPES)}")
    return _DTYPES[name]


def build_runner(config: WorkerConfig):
    """Loads the model and allocates its pools; returns (ModelRunner, pb.WorkerHello)."""
    device = torch.device(config.device or ("cuda:0" if torch.cuda.is_available() else "cpu"))
    dtype = _dtype(config.dtype or ("float32" if device.type == "cpu" else "bfloat16"))
    state_dtype = _dtype(config.state_dtype)
    card = load_model_card(config.model)
    model, model_config = load_model(config.model, device=device, dtype=dtype, progress=False)
    freed = prepack_nvfp4(model)
    if freed:
        torch.cuda.empty_cache()  # the KV budget reads the device's free memory, not torch's cached blocks
        print(f"worker: NVFP4 weights repacked for the kernels; {freed / 1e9:.2f} GB of checkpoint layout freed",
              flush=True)
    sizes = size_pools(model_config, config.block_size, config.num_state_slots, config.num_kv_blocks,
                       _kv_cache_bytes(config, model_config, device, dtype), dtype)
    cache = ModelCache(model_config, sizes.num_blocks, sizes.block_size, sizes.num_slots, device, dtype,
                       state_dtype=state_dtype)
    runner = ModelRunner(model, model_config, cache, card["vocab_size"], config.sampler_seed,
                         grammars=GrammarBook.from_card(card))
    hello = pb.WorkerHello(model_id=card["model_id"], num_blocks=sizes.num_blocks, block_size=sizes.block_size,
                           num_slots=sizes.num_slots, max_context_len=card["max_context_len"],
                           device=_device_name(device), worker_id=uuid.uuid4().hex[:12],
                           vocab_size=card["vocab_size"], wire_version=WIRE_VERSION,
                           checkpoint_digest=card["checkpoint_digest"])
    return runner, hello


def cpu_threads(requested: int) -> int:
    """Torch CPU threads: `requested` when > 0, else every core but the two the scheduler and gateway use."""
    return requested if requested > 0 else max(1, (os.cpu_count() or 1) - 2)


def capture_at_start(runner) -> None:
    """Captures the decode graph of every padded row count at the smallest key width, and the piecewise prefill
    graphs of every padded token count (worker/prefill_graphs.py; ~0.2 s a size for the 27B shape on the H200),
    before the worker reports ready (CAPTURE_ENV, default on; GPU only), so that no first request pays for a capture
    and the first compile of the kernels that row count uses: lazily, a new row count's first step took up to 5.7 s
    (rows = 8, H200, session 7) and showed as a 2 s TTFT p99 at C = 8 (bench/serve_http.py, device run 3 of
    2026-11-30). Wider key widths are still captured on first use (their kernels are compiled by then). Then a step
    of each 2-16 tokens compiles the mixers' cores and, where the prefill graphs are off, its GEMV variants
    (worker/warmup.py)."""
    if os.environ.get(CAPTURE_ENV, "1") != "1":
        return
    for name, graphs, count in (("decode", runner.graphs, "row counts"),
                                ("prefill", runner.prefill_graphs, "token counts")):
        if graphs is None:
            continue
        t0 = time.perf_counter()
        print(f"worker: capturing the {name} graphs for {len(graphs.sizes)} {count} ({CAPTURE_ENV}=0 skips this)",
              flush=True)
        graphs.capture_all()
        print(f"worker: {name} graphs captured in {time.perf_counter() - t0:.1f} s", flush=True)
    warm_up_eager(runner)


def run(config: WorkerConfig) -> None:
    """Runs the worker process: loads the model and sizes its pools, captures the graphs (GPU), connects to the
    scheduler and runs steps until a Shutdown or the end of a SIGTERM drain."""
    torch.set_num_threads(cpu_threads(config.num_threads))
    runner, hello = build_runner(config)
    capture_at_start(runner)
    link = SchedulerLink(config.worker_addr, hello)
    link.start()
    print(f"worker ready: {hello.worker_id} on {hello.device}, {hello.num_blocks} KV blocks x {hello.block_size} "
          f"tokens, {hello.num_slots} state slots, connected to {config.worker_addr} (+1)", flush=True)
    signal.signal(signal.SIGTERM, _drain_on_sigterm(link, config.drain_grace_s))
    StepPipeline(runner, link.steps, link.send_result).run()
    link.close()


def _drain_on_sigterm(link: SchedulerLink, grace_s: float):
    """SIGTERM reaches the worker with its scheduler (one Pod, `make run`'s stop) while the scheduler drains: the
    worker serves its steps until it has had none for 2 s (its requests are done; then it exits 0), or grace_s; a
    second SIGTERM kills it."""
    def on_sigterm(signum, _frame) -> None:
        if link.draining:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        print(f"worker: SIGTERM, serving steps until there are none (up to {grace_s:.0f} s)", flush=True)
        link.drain(grace_s)
    return on_sigterm


def main(argv=None) -> None:
    """Entry point `python -m worker.server`: config from flags and SPARKINFER_* variables, printed once; exits with a
    message when the checkpoint cannot be loaded."""
    config = parse_config(argv)
    print(config.describe(), flush=True)
    try:
        run(config)
    except CheckpointError as exc:
        sys.exit(f"worker: cannot load {config.model}: {exc}")


if __name__ == "__main__":
    main()
