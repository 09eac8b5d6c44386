"""Launcher process (`make run`): what can be checked before the three processes start, each fault in one line: the
checkpoint folder, and every TCP port the stack will listen on (a second `make run` found them taken only after it
had started, printed the first stack's URL as its own, then a scheduler traceback)."""
from __future__ import annotations

import errno
import os
import socket

from gateway.model import ModelCard
from proto import pb
from proto.frames import split_addr
from worker.checkpoint_errors import CheckpointError, check_not_lfs_pointer
from worker.model_card import load_model_card

IN_USE = "the port is in use (another `make run`, or another server)"


class BadSetting(ValueError):
    """A port variable that is not a TCP port number."""


def _port(variable: str, text: str, offset: int = 0, lowest: int = 0) -> int:
    """text as a port number (0 = off, where lowest allows it); offset: the port after it, for the result port."""
    try:
        port = int(text) + offset
    except ValueError:
        raise BadSetting(f"{variable}={text!r} is not a port number") from None
    if offset and port > 65535:
        raise BadSetting(f"{variable}: the result port, its port + 1, would be {port} (past 65535)")
    if not lowest <= port <= 65535:
        raise BadSetting(f"{variable}={text!r} is not a port number ({lowest}-65535)")
    return port


def stack_ports(env: dict) -> list[tuple[str, str, str, int]]:
    """(port variable, host variable, host, port) of each TCP port the gateway and the scheduler will bind, with env
    as stack_env fills it; the scheduler's metrics port binds its gRPC host, and the ZeroMQ step port and the result
    port after it bind SPARKINFER_WORKER_BIND_HOST (default: the gRPC host). Raises BadSetting."""
    grpc_host = env["SPARKINFER_GRPC_HOST"]
    worker_host_var = "SPARKINFER_WORKER_BIND_HOST" if env.get("SPARKINFER_WORKER_BIND_HOST") else \
        "SPARKINFER_GRPC_HOST"
    try:
        step_port = split_addr(env["SPARKINFER_WORKER_ADDR"])[1]
    except ValueError as exc:
        raise BadSetting(f"SPARKINFER_WORKER_ADDR: {exc}") from None
    ports = [("SPARKINFER_PORT", "SPARKINFER_HOST", env["SPARKINFER_HOST"],
              _port("SPARKINFER_PORT", env["SPARKINFER_PORT"], lowest=1)),
             ("SPARKINFER_GRPC_PORT", "SPARKINFER_GRPC_HOST", grpc_host,
              _port("SPARKINFER_GRPC_PORT", env["SPARKINFER_GRPC_PORT"], lowest=1)),
             ("SPARKINFER_WORKER_ADDR", worker_host_var, env.get(worker_host_var), step_port),
             ("SPARKINFER_WORKER_ADDR (its port + 1)", worker_host_var, env.get(worker_host_var),
              _port("SPARKINFER_WORKER_ADDR", str(step_port), 1))]
    metrics_port = _port("SPARKINFER_SCHEDULER_METRICS_PORT", env.get("SPARKINFER_SCHEDULER_METRICS_PORT") or "9091")
    if metrics_port:
        ports.append(("SPARKINFER_SCHEDULER_METRICS_PORT", "SPARKINFER_GRPC_HOST", grpc_host, metrics_port))
    return ports


def bind_problem(host: str, port: int) -> str | None:
    """None when a server could listen on host:port now (SO_REUSEADDR, as the servers bind), else why not."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        return f"cannot resolve {host!r} ({exc.strerror})"
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return IN_USE
            return exc.strerror or str(exc)
    return None


def port_problems(env: dict) -> list[str]:
    """One line per port the stack cannot listen on, naming the variable that changes it."""
    try:
        ports = stack_ports(env)
    except BadSetting as exc:
        return [str(exc)]
    problems = []
    for port_var, host_var, host, port in ports:
        reason = bind_problem(host, port)
        if reason == IN_USE:
            problems.append(f"cannot listen on {host}:{port} ({port_var}): {reason}; stop what holds it, or set "
                            f"{port_var.split(' ')[0]} to another port")
        elif reason is not None:
            problems.append(f"cannot listen on {host}:{port} ({host_var}): {reason}")
    return problems


def _snapshot_hint(folder: str) -> str:
    """", as in ...": the checkpoint inside a Hugging Face hub cache folder (models--ORG--NAME, which holds blobs/,
    refs/ and snapshots/HASH/, the folder a download fills) when `folder` is one, else "": the snapshot refs/main
    names, else (a download of one commit hash writes no ref) the newest snapshot that holds a config.json."""
    snapshots = os.path.join(folder, "snapshots")
    try:
        with open(os.path.join(folder, "refs", "main"), encoding="utf-8") as f:
            snapshot = os.path.join(snapshots, f.read().strip())
        if os.path.isfile(os.path.join(snapshot, "config.json")):
            return f", as in {snapshot}"
    except OSError:
        pass
    try:
        found = [os.path.join(snapshots, name) for name in os.listdir(snapshots)
                 if os.path.isfile(os.path.join(snapshots, name, "config.json"))]
    except OSError:
        return ""
    return f", as in {max(found, key=os.path.getmtime)}" if found else ""


def model_problem(model: str, root: str) -> str | None:
    """None when `model` (relative to root, where the processes run) reads as a checkpoint folder (config.json, and a
    tokenizer.json and chat template the gateway can load; the weights load in the worker), else why not."""
    folder = os.path.join(root, model)
    try:
        card = load_model_card(folder)
        for shard in sorted(os.listdir(folder)):
            if shard.endswith(".safetensors"):
                check_not_lfs_pointer(os.path.join(folder, shard))
    except CheckpointError as exc:
        return f"cannot serve MODEL={model}: {exc} (MODEL is a Hugging Face checkpoint folder: config.json, " \
               f"tokenizer.json, *.safetensors{_snapshot_hint(folder)})"
    config_path = os.path.join(folder, "tokenizer_config.json")
    info = pb.InfoResponse(model_id=card["model_id"], max_context_len=int(card["max_context_len"]),
                           tokenizer_json=card["tokenizer_json"], chat_template=card["chat_template"],
                           eos_token_ids=card["eos_token_ids"], generation_config_json=card["generation_config_json"],
                           vocab_size=card["vocab_size"])
    if os.path.isfile(config_path):
        with open(config_path, encoding="utf-8") as f:
            info.tokenizer_config_json = f.read()
    try:
        ModelCard.from_info(info)
    except Exception as exc:
        # what the gateway would answer every request with (503 model_unloadable)
        return f"cannot serve MODEL={model}: its tokenizer.json or chat template does not load " \
               f"({type(exc).__name__}: {exc})"
    return None


def problems(env: dict, model: str, root: str) -> list[str]:
    """Every fault found before start-up: the checkpoint folder first, then the ports."""
    found = model_problem(model, root)
    return ([found] if found else []) + port_problems(env)
