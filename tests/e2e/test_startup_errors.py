"""End to end: what a user sees when the stack cannot start: a port taken (a second `make run`), a wrong or broken
MODEL folder. Each process says it in one line naming the file or the variable to change, without a traceback, and
`make run` (deploy.launch) checks before it starts anything, so it never prints another server's URL as its own."""
import os
import shutil
import socket
import subprocess
import sys
from concurrent import futures

import grpc
import pytest

from tests.e2e.stack import DEFAULT_MODEL, REPO, free_port


def stack_env(**extra) -> dict:
    env = dict(os.environ, SPARKINFER_PORT=str(free_port()), SPARKINFER_GRPC_PORT=str(free_port()),
               SPARKINFER_SCHEDULER_METRICS_PORT=str(free_port()),
               SPARKINFER_WORKER_ADDR=f"tcp://127.0.0.1:{free_port(pair=True)}", SPARKINFER_NUM_THREADS="1")
    env.update(extra)
    return env


def run(module: str, *args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=env or stack_env(),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def held_port():
    """A port some other server listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.fixture
def broken_model(tmp_path):
    """A copy of the tiny checkpoint; the test breaks one file of it."""
    if not os.path.isfile(os.path.join(DEFAULT_MODEL, "config.json")):
        pytest.skip("tiny checkpoint missing: run `make model`")
    folder = tmp_path / "broken"
    shutil.copytree(DEFAULT_MODEL, folder)
    return folder


def assert_one_line(output: str, *words: str) -> None:
    assert "Traceback" not in output
    assert all(word in output for word in words), output


@pytest.mark.parametrize("variable", ["SPARKINFER_PORT", "SPARKINFER_GRPC_PORT", "SPARKINFER_SCHEDULER_METRICS_PORT"])
def test_launch_with_a_port_taken_starts_nothing_and_names_the_variable(held_port, variable):
    result = run("deploy.launch", "--model", DEFAULT_MODEL, env=stack_env(**{variable: str(held_port)}))
    assert result.returncode == 1
    assert result.stdout == ""  # no process started, no "SparkInfer is serving" (that was the other server)
    assert result.stderr == (f"launch: cannot listen on 127.0.0.1:{held_port} ({variable}): the port is in use "
                             f"(another `make run`, or another server); stop what holds it, or set {variable} to "
                             f"another port\n")


def test_launch_with_the_worker_result_port_taken_names_the_worker_address(held_port):
    result = run("deploy.launch", env=stack_env(SPARKINFER_WORKER_ADDR=f"tcp://127.0.0.1:{held_port - 1}"))
    assert result.returncode == 1 and result.stdout == ""
    assert_one_line(result.stderr, f"127.0.0.1:{held_port} (SPARKINFER_WORKER_ADDR (its port + 1)): the port is in use")


@pytest.mark.parametrize("setting, message", [
    ({"SPARKINFER_PORT": "80800"}, "launch: SPARKINFER_PORT='80800' is not a port number (1-65535)\n"),
    ({"SPARKINFER_GRPC_PORT": "0"}, "launch: SPARKINFER_GRPC_PORT='0' is not a port number (1-65535)\n"),
    ({"SPARKINFER_HOST": "no-such-host.invalid"}, "launch: cannot listen on no-such-host.invalid:"),
    ({"SPARKINFER_WORKER_ADDR": "ipc:///tmp/x"},
     "launch: SPARKINFER_WORKER_ADDR: worker address 'ipc:///tmp/x' is not tcp://host:port\n"),
    ({"SPARKINFER_WORKER_ADDR": "tcp://127.0.0.1:65535"},
     "launch: SPARKINFER_WORKER_ADDR: the result port, its port + 1, would be 65536 (past 65535)\n"),
], ids=["port-out-of-range", "grpc-port-0", "unknown-host", "worker-addr-not-tcp", "result-port-past-65535"])
def test_launch_with_a_bad_address_says_which(setting, message):
    result = run("deploy.launch", env=stack_env(**setting))
    assert result.returncode == 1 and result.stdout == ""
    assert_one_line(result.stderr, message)


def test_launch_with_a_missing_model_folder_says_so(tmp_path):
    result = run("deploy.launch", "--model", str(tmp_path / "nope"))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (f"launch: cannot serve MODEL={tmp_path / 'nope'}: checkpoint file {tmp_path / 'nope'}: "
                             f"checkpoint folder does not exist (MODEL is a Hugging Face checkpoint folder: "
                             f"config.json, tokenizer.json, *.safetensors)\n")


@pytest.mark.parametrize("config, detail", [
    ("{bad", "not valid JSON"), ("[]", "not a JSON object (a list)"),
    ('{"model_type": "llama"}', "unsupported model: model_type 'llama'"),
], ids=["not-json", "json-list", "other-architecture"])
def test_launch_with_a_broken_config_names_the_file(broken_model, config, detail):
    (broken_model / "config.json").write_text(config)
    result = run("deploy.launch", "--model", str(broken_model))
    assert result.returncode == 1 and result.stdout == ""
    assert_one_line(result.stderr, f"launch: cannot serve MODEL={broken_model}: ", str(broken_model / "config.json"),
                    detail)
    assert len(result.stderr.splitlines()) == 1


def test_scheduler_with_a_bad_model_says_so_in_one_line(tmp_path):
    result = run("scheduler.server", "--model", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr == f"scheduler: checkpoint file {tmp_path / 'config.json'}: missing\n"


def test_scheduler_with_a_malformed_worker_address_says_so_in_one_line():
    result = run("scheduler.server", env=stack_env(SPARKINFER_WORKER_ADDR="ipc:///tmp/x"))
    assert result.returncode == 1
    assert result.stderr == "scheduler: SPARKINFER_WORKER_ADDR: worker address 'ipc:///tmp/x' is not tcp://host:port\n"


def test_scheduler_with_a_max_model_len_past_the_checkpoint_says_so_in_one_line():
    result = run("scheduler.server", env=stack_env(SPARKINFER_MAX_MODEL_LEN="9000"))
    assert result.returncode == 1
    assert result.stderr == ("scheduler: SPARKINFER_MAX_MODEL_LEN=9000 is past the checkpoint's context (8192 tokens: "
                             "config.json's max_position_embeddings, times a yarn or linear rope's factor)\n")


def test_scheduler_does_not_share_its_grpc_port_with_another_server():
    """gRPC's default SO_REUSEPORT let a second scheduler bind a taken port; the kernel split the calls."""
    other = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = other.add_insecure_port("127.0.0.1:0")
    other.start()
    try:
        result = run("scheduler.server", env=stack_env(SPARKINFER_GRPC_PORT=str(port)))
    finally:
        other.stop(None)
    assert result.returncode == 1
    assert_one_line(result.stderr, f"scheduler: cannot listen on 127.0.0.1:{port} (SPARKINFER_GRPC_PORT): the port "
                                   f"is in use")


def test_worker_with_unreadable_weights_says_so_in_one_line(broken_model):
    shard = broken_model / "model.safetensors"
    shard.write_bytes(shard.read_bytes()[:1000])
    result = run("worker.server", "--model", str(broken_model))
    assert result.returncode == 1
    assert result.stderr == (f"worker: cannot load {broken_model}: checkpoint file {shard}: not a readable "
                             f"safetensors file (Error while deserializing header: invalid header length)\n")


def test_gateway_with_its_port_taken_says_so_in_one_line(held_port):
    result = run("gateway.app", "--port", str(held_port))
    assert result.returncode == 1
    assert_one_line(result.stderr, f"gateway: cannot listen on 127.0.0.1:{held_port} (SPARKINFER_HOST, "
                                   f"SPARKINFER_PORT): ", "address already in use\n")



def test_launch_with_a_tokenizer_the_gateway_cannot_load_says_so(broken_model):
    """The gateway answered 500 to each /health probe and make run waited out its 600 s start-up timeout."""
    (broken_model / "tokenizer.json").write_text('{"model": 1}')
    result = run("deploy.launch", "--model", str(broken_model))
    assert result.returncode == 1 and result.stdout == ""
    assert_one_line(result.stderr, f"launch: cannot serve MODEL={broken_model}: its tokenizer.json or chat template "
                                   f"does not load (Exception: ")
