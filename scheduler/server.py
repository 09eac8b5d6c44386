"""Scheduler process entry point: the gRPC Serving service, grpc.health.v1, /metrics, and the step engine.

Run: python -m scheduler.server --model models/tiny   (flags or SPARKINFER_* env vars; see scheduler/config.py)
"""
import asyncio
import logging
import os
import signal
import sys

import grpc
import zmq
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from proto import ADMITTED_METADATA_KEY, CONTEXT_METADATA_KEY, pb, pb_grpc
from proto.backlog import backlog_options
from proto.keepalive import server_options
from proto.served_names import served_names
from scheduler.admission import ContextLengthError, RequestError, ShuttingDownError
from scheduler.config import log_level, parse_config
from scheduler.engine import Engine
from scheduler.metrics import Metrics, serve_metrics
from scheduler.wire import WorkerLink
from worker.checkpoint_errors import CheckpointError
from worker.model_card import load_model_card

log = logging.getLogger("sparkinfer.scheduler")
SERVICE_NAME = "sparkinfer.v1.Serving"
# tokenizer.json of a real checkpoint (~11 MB) travels in InfoResponse; clients must raise their limit too.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# gRPC binds with SO_REUSEPORT by default: a second scheduler on a taken port started without a word and the kernel
# split the gateways' calls between the two.
# Gateways and scheduler ping each other every 10 s, also on a stream silent for minutes (a queued request); a gateway
# that stops answering has its calls cancelled (proto/keepalive.py).
GRPC_OPTIONS = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), ("grpc.so_reuseport", 0)] + server_options() \
    + backlog_options()


class StartupError(Exception):
    """A fault the user fixes (a port taken, a bad checkpoint folder): printed in one line, without a traceback."""


def _bind(variable: str, address: str, bind):
    """bind(), or StartupError naming address and the variable that moves it."""
    try:
        return bind()
    except ValueError as exc:
        raise StartupError(f"{variable}: {exc}") from None
    except OSError as exc:
        reason = exc.strerror
    except RuntimeError:
        # grpc says only "Failed to bind to address ..."; its log line above has the errno
        reason = "the port is in use, or the host is no address of this machine"
    except zmq.ZMQError as exc:
        reason = str(exc).split(" (addr=")[0]
    raise StartupError(f"cannot listen on {address} ({variable}): {reason}")


def _read_text(folder: str, name: str) -> str:
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8") as f:
        return f.read()


async def _refuse(context, exc: RequestError) -> None:
    """Ends the call with exc's status; a context overflow carries its counts (CONTEXT_METADATA_KEY) as well."""
    metadata = ()
    if isinstance(exc, ContextLengthError):
        metadata = ((CONTEXT_METADATA_KEY, ",".join(map(str, exc.counts))),)
    await context.abort(grpc.StatusCode[exc.code], str(exc), trailing_metadata=metadata)


class ServingServicer(pb_grpc.ServingServicer):
    def __init__(self, engine: Engine, card: dict, model_path: str):
        self.engine, self.card, self.model_path = engine, card, model_path
        self.tokenizer_config_json = _read_text(model_path, "tokenizer_config.json")
        self.config_json = _read_text(model_path, "config.json")

    async def Generate(self, request, context):
        """Streams one request's pb.GenerateResponse messages; initial metadata says it was admitted. A refusal (queue
        full, too long, draining) or a failure mid-stream aborts the call with the RequestError's status code and
        message; a cancelled call cancels the request."""
        try:
            queue = self.engine.submit(request)
        except RequestError as exc:
            await _refuse(context, exc)
        try:
            # Admitted, said at once: a gateway that holds a stream's headers until every choice of the request is
            # admitted or refused (so that a refusal keeps its 429) need not wait for each one's first token.
            await context.send_initial_metadata(((ADMITTED_METADATA_KEY, "1"),))
            while True:
                item = await queue.get()
                if isinstance(item, RequestError):
                    await _refuse(context, item)
                yield item
                if item.finish_reason:
                    return
        finally:
            # Client gone (or request done): frees slot and blocks before the next step; no-op when finished.
            self.engine.cancel(request.req_id)

    async def Finish(self, request, context):
        """Ends a request with the gateway's finish reason (a stop string matched, a time limit):
        pb.FinishResponse(finished) says whether it was still running; a reason not in FINISH_REASONS aborts the call
        INVALID_ARGUMENT."""
        try:
            return pb.FinishResponse(finished=self.engine.finish(request.req_id, request.finish_reason))
        except RequestError as exc:
            await context.abort(grpc.StatusCode[exc.code], str(exc))

    async def Info(self, request, context):
        """The model card (pb.InfoResponse): id, tokenizer, chat template, eos ids, context length capped by the
        worker's KV pool. UNAVAILABLE until a worker has said hello."""
        # The context is the checkpoint's, capped by the KV pool a worker brings (its hello): unknown until then. A
        # gateway caches the card it gets, so the checkpoint's value given early stayed its context for good:
        # /v1/models said 8192 while the scheduler ended every request at the pool's 4096 ("length", never a 400).
        max_context_len = self.engine.scheduler.max_context_len
        if not max_context_len:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "no worker has connected yet, so the context length "
                                                             "is not known; retry once the model is loaded")
        card = self.card
        return pb.InfoResponse(
            model_id=card["model_id"], max_context_len=max_context_len,
            tokenizer_json=card["tokenizer_json"], chat_template=card["chat_template"],
            eos_token_ids=card["eos_token_ids"], generation_config_json=card["generation_config_json"],
            architecture=card["architecture"], quantization=card.get("quantization", "bf16"),
            num_parameters=card["num_parameters"], tokenizer_config_json=self.tokenizer_config_json,
            vocab_size=self.engine.vocab_size, config_json=self.config_json, model_path=self.model_path)

    async def Load(self, request, context):
        """The engine's pb.LoadResponse (Engine.load)."""
        return self.engine.load()

    async def ResetPrefixCache(self, request, context):
        """Drops the prefix cache's ready entries (Engine.reset_prefix_cache): how many went and how many are left."""
        return self.engine.reset_prefix_cache()


# The health updates running: the event loop keeps only weak references to tasks (asyncio docs, create_task: "Save
# a reference to the result of this function, to avoid a task disappearing mid-execution").
HEALTH_TASKS: set = set()


def _health_callback(health):
    def on_health(serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", SERVICE_NAME):
            task = asyncio.ensure_future(health.set(name, status))
            HEALTH_TASKS.add(task)
            task.add_done_callback(HEALTH_TASKS.discard)
    return on_health


def context_len(config, checkpoint_len: int) -> int:
    """The context served: SPARKINFER_MAX_MODEL_LEN when set (vLLM's --max-model-len), at most the checkpoint's (a KV
    pool that holds fewer tokens caps it further once the worker says hello)."""
    if config.max_model_len > checkpoint_len:
        raise StartupError(f"SPARKINFER_MAX_MODEL_LEN={config.max_model_len} is past the checkpoint's context "
                           f"({checkpoint_len} tokens: config.json's max_position_embeddings, "
                           "times a yarn or linear rope's factor)")
    return config.max_model_len or checkpoint_len


async def serve(config) -> None:
    """Runs the scheduler process until SIGTERM / SIGINT: binds the worker link, /metrics and gRPC (Serving, Health),
    starts the engine, then drains and stops. A port in use raises StartupError naming its variable."""
    card = load_model_card(config.model)
    card["max_context_len"] = context_len(config, int(card["max_context_len"]))
    worker_host = config.worker_bind_host or config.grpc_host
    step_port = config.worker_addr.rsplit(":", 1)[-1]
    link = _bind("SPARKINFER_WORKER_ADDR", f"tcp://{worker_host}:{step_port} or the port after it",
                 lambda: WorkerLink(config.worker_addr, worker_host))
    metrics = Metrics(max_model_len=card["max_context_len"])
    _bind("SPARKINFER_SCHEDULER_METRICS_PORT", f"{config.grpc_host}:{config.metrics_port}",
          lambda: serve_metrics(config.grpc_host, config.metrics_port, (served_names(config.served_model_name) or [card["model_id"]])[0]))
    health = health_aio.HealthServicer()
    on_health = _health_callback(health)
    on_health(False)
    engine = Engine(config, card, link, metrics, on_health=on_health)
    server = grpc.aio.server(options=GRPC_OPTIONS)
    pb_grpc.add_ServingServicer_to_server(ServingServicer(engine, card, config.model), server)
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    address = f"{config.grpc_host}:{config.grpc_port}"
    port = _bind("SPARKINFER_GRPC_PORT", address, lambda: server.add_insecure_port(address))
    await server.start()
    engine.start()
    print(f"scheduler ready: grpc {config.grpc_host}:{port}, metrics :{config.metrics_port}, "
          f"worker link {config.worker_addr} (+1), model {card['model_id']}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await drain(engine, health, config.drain_grace_s, stop)
    await server.stop(grace=1.0)
    await engine.stop()
    link.close()


async def drain(engine: Engine, health, grace_s: float, stop: asyncio.Event) -> None:
    """After SIGTERM: health turns NOT_SERVING and new requests are refused at once, while the admitted ones get up
    to grace_s to finish (a second signal cuts them), as vLLM's --shutdown-timeout drains its engine."""
    await health.enter_graceful_shutdown()
    engine.begin_drain()
    stop.clear()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    if engine.streams:
        log.info("stopping: draining %d requests in flight (up to %.0f s)", len(engine.streams), grace_s)
    while engine.streams and not stop.is_set() and loop.time() < deadline:
        await asyncio.sleep(0.05)
    if engine.streams:
        log.warning("stopping: cutting %d requests still in flight", len(engine.streams))
        # Each call ends with why, before the server stops: its cancel said only "Cancelling all calls".
        error = ShuttingDownError(f"the scheduler is shutting down and cut the request before it finished (drain "
                                  f"grace {grace_s:g} s, SPARKINFER_DRAIN_GRACE_S)")
        for stream in engine.streams.values():
            stream.queue.put_nowait(error)


def main(argv=None) -> None:
    """Entry point `python -m scheduler.server`: config from flags and SPARKINFER_* variables, printed once; exits with
    a message on a startup or checkpoint error."""
    config = parse_config(argv)
    logging.basicConfig(level=log_level(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    print(config.describe(), flush=True)
    try:
        asyncio.run(serve(config))
    except (StartupError, CheckpointError) as exc:
        sys.exit(f"scheduler: {exc}")


if __name__ == "__main__":
    main()
