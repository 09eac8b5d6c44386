"""Scheduler process: its one configuration dataclass, filled from flags and SPARKINFER_* environment variables."""
import argparse
import logging
import math
import os
from dataclasses import dataclass, fields


@dataclass
class SchedulerConfig:
    model: str = "models/tiny"
    grpc_host: str = "127.0.0.1"
    grpc_port: int = 50051
    metrics_port: int = 9091
    worker_addr: str = "tcp://127.0.0.1:5557"
    worker_bind_host: str = ""
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 64
    max_queue_depth: int = 0
    max_model_len: int = 0
    # Silence only: a worker process that exits is seen at the next ping (WorkerLink.serving_gone). 0.8 s failed every
    # request of a live worker whose I/O thread a loaded host (load average 13 on two cores) held back 0.8 s.
    worker_timeout_s: float = 5.0
    ping_interval_s: float = 0.2
    step_timeout_s: float = 60.0
    async_scheduling: int = 1
    prefix_cache: int = 1
    prefix_cache_entries: int = 32
    prefix_cache_min_tokens: int = 1024
    drain_grace_s: float = 30.0
    served_model_name: str = ""

    def describe(self) -> str:
        """One line `scheduler config: name=value ...` of every field, printed once at start."""
        return "scheduler config: " + " ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))


# Flag name -> what it sets, for --help (README's Configuration table says the same at more length).
HELP = {
    "model": "checkpoint folder; the scheduler reads only its model card",
    "grpc_host": "interface the gRPC server listens on",
    "grpc_port": "gRPC port the gateways connect to",
    "metrics_port": "Prometheus /metrics over HTTP, on grpc_host; 0 = off",
    "worker_addr": "steps go out on this port, results come back on port + 1",
    "worker_bind_host": "interface the ZeroMQ sockets bind; '' = grpc_host",
    "max_num_batched_tokens": "tokens per packed step (prefill chunks + decode rows)",
    "max_num_seqs": "running requests / rows per step at most",
    "max_queue_depth": "waiting requests at most beyond those a free seat takes at the next step, past it 429; "
                       "0 = unlimited",
    "max_model_len": "context (prompt + output tokens) at most; 0 = the checkpoint's",
    "worker_timeout_s": "silence after which the worker counts as dead",
    "ping_interval_s": "liveness ping period (below worker_timeout_s)",
    "step_timeout_s": "a step with no result after this counts as a dead worker",
    "async_scheduling": "1 = plan the next decode step while the worker runs this one; 0 = one step at a time",
    "prefix_cache": "automatic prefix cache (scheduler/prefix_cache.py): 1 = on, 0 = off",
    "prefix_cache_entries": "cached prefixes at most (each holds one GDN state slot)",
    "prefix_cache_min_tokens": "shortest prefix (tokens) worth a checkpoint; also the grid step (at least 256) of a "
                               "prompt with no <|im_start|>",
    "drain_grace_s": "on SIGTERM/SIGINT: how long admitted requests may take to finish",
    "served_model_name": "the model_name label of its metrics (the first of several names); '' = the checkpoint's id",
}


# Flag name -> environment variable that fills it when the flag is absent.
ENV_NAMES = {
    "model": "SPARKINFER_MODEL",
    "grpc_host": "SPARKINFER_GRPC_HOST",
    "grpc_port": "SPARKINFER_GRPC_PORT",
    "metrics_port": "SPARKINFER_SCHEDULER_METRICS_PORT",
    "worker_addr": "SPARKINFER_WORKER_ADDR",
    "worker_bind_host": "SPARKINFER_WORKER_BIND_HOST",
    "max_num_batched_tokens": "SPARKINFER_MAX_NUM_BATCHED_TOKENS",
    "max_num_seqs": "SPARKINFER_MAX_NUM_SEQS",
    "max_queue_depth": "SPARKINFER_MAX_QUEUE_DEPTH",
    "max_model_len": "SPARKINFER_MAX_MODEL_LEN",
    "worker_timeout_s": "SPARKINFER_WORKER_TIMEOUT_S",
    "ping_interval_s": "SPARKINFER_PING_INTERVAL_S",
    "step_timeout_s": "SPARKINFER_STEP_TIMEOUT_S",
    "async_scheduling": "SPARKINFER_ASYNC_SCHEDULING",
    "prefix_cache": "SPARKINFER_PREFIX_CACHE",
    "prefix_cache_entries": "SPARKINFER_PREFIX_CACHE_ENTRIES",
    "prefix_cache_min_tokens": "SPARKINFER_PREFIX_CACHE_MIN_TOKENS",
    "drain_grace_s": "SPARKINFER_DRAIN_GRACE_S",
    "served_model_name": "SPARKINFER_SERVED_MODEL_NAME",
}


def parse_config(argv=None, environ=None) -> SchedulerConfig:
    """Flags win over environment variables, which win over the defaults. Raises SystemExit on bad values."""
    environ = os.environ if environ is None else environ
    # No usage block before an error: a bad SPARKINFER_* value stops the start with one line (README, Configuration).
    parser = argparse.ArgumentParser(prog="python -m scheduler.server", usage=argparse.SUPPRESS,
                                     description="SparkInfer scheduler")
    defaults = SchedulerConfig()
    for f in fields(SchedulerConfig):
        env = ENV_NAMES[f.name]
        parser.add_argument("--" + f.name.replace("_", "-"), default=None,
                            help=f"{HELP[f.name]} (env {env}, default {getattr(defaults, f.name)!r})")
    args = parser.parse_args(argv)
    values = {}
    for f in fields(SchedulerConfig):
        kind = f.type
        raw = getattr(args, f.name)
        if raw is None and ENV_NAMES[f.name] in environ:
            raw = environ[ENV_NAMES[f.name]]
        try:
            values[f.name] = getattr(defaults, f.name) if raw is None else kind(raw)
        except ValueError:
            parser.error(f"{f.name} ({ENV_NAMES[f.name]}): {raw!r} is not "
                         f"{'an integer' if kind is int else 'a number'}")
    config = SchedulerConfig(**values)
    for name, (ok, must) in _RULES.items():
        if not ok(getattr(config, name)):
            parser.error(f"{name} ({ENV_NAMES[name]}): {getattr(config, name)!r} {must}")
    if config.ping_interval_s >= config.worker_timeout_s:
        parser.error(f"ping_interval_s (SPARKINFER_PING_INTERVAL_S) {config.ping_interval_s} must be less than "
                     f"worker_timeout_s (SPARKINFER_WORKER_TIMEOUT_S) {config.worker_timeout_s}, or an idle worker "
                     f"counts as dead between two pings")
    return config


def _seconds(value: float) -> bool:
    return math.isfinite(value) and value > 0


# Checked at start: a value out of range made the scheduler busy-loop (a ping interval <= 0), count every worker as
# dead (a timeout <= 0) or fail every request mid-way, instead of saying so.
_RULES = {
    "grpc_port": (lambda v: 0 <= v <= 65535, "is not a port number (0-65535; 0 = any free port)"),
    "metrics_port": (lambda v: 0 <= v <= 65535, "is not a port number (0-65535; 0 = off)"),
    "max_num_batched_tokens": (lambda v: v > 0, "must be > 0"),
    "max_num_seqs": (lambda v: v > 0, "must be > 0"),
    "max_queue_depth": (lambda v: v >= 0, "must be >= 0 (0 = unlimited)"),
    "max_model_len": (lambda v: v >= 0, "must be >= 0 (0 = the checkpoint's context)"),
    "worker_timeout_s": (_seconds, "must be a number of seconds > 0"),
    "ping_interval_s": (_seconds, "must be a number of seconds > 0"),
    "step_timeout_s": (_seconds, "must be a number of seconds > 0"),
    "async_scheduling": (lambda v: v in (0, 1), "must be 0 or 1"),
    "prefix_cache": (lambda v: v in (0, 1), "must be 0 or 1"),
    "prefix_cache_entries": (lambda v: v >= 0, "must be >= 0"),
    "prefix_cache_min_tokens": (lambda v: v >= 0, "must be >= 0"),
    "drain_grace_s": (lambda v: math.isfinite(v) and v >= 0, "must be a number of seconds >= 0"),
}


def log_level(environ=None) -> int:
    """SPARKINFER_LOG_LEVEL as a logging level (any case); SystemExit naming it when it is none."""
    environ = os.environ if environ is None else environ
    name = environ.get("SPARKINFER_LOG_LEVEL", "INFO").upper()
    level = logging.getLevelName(name)
    if not isinstance(level, int):
        raise SystemExit(f"scheduler: SPARKINFER_LOG_LEVEL={environ['SPARKINFER_LOG_LEVEL']!r} is not a logging "
                         f"level (DEBUG, INFO, WARNING, ERROR, CRITICAL)")
    return level
