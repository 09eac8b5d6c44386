"""Unit tests: a SPARKINFER_* value out of its range stops each process at its start with one line naming the variable
and the range, as vLLM's engine arguments refuse a bad value before anything loads (argparse choices and its config
checks, vllm/engine/arg_utils.py). Before, a bad dtype, device or block size was a traceback after the model had
loaded, a port past 65535 an OverflowError, a ping interval <= 0 a busy loop, a step timeout <= 0 failed every request,
a keep-alive period of 0 sent a comment every 10 ms, and a negative KV budget or seed was taken as the default."""
import pytest

from deploy import launch
from gateway import config as gateway_config
from scheduler import config as scheduler_config
from worker import server as worker_server


@pytest.mark.parametrize("name, value, line", [
    ("SPARKINFER_PING_INTERVAL_S", "0", "ping_interval_s (SPARKINFER_PING_INTERVAL_S): 0.0 must be a number of "
                                        "seconds > 0"),
    ("SPARKINFER_WORKER_TIMEOUT_S", "nan", "worker_timeout_s (SPARKINFER_WORKER_TIMEOUT_S): nan must be a number of "
                                           "seconds > 0"),
    ("SPARKINFER_STEP_TIMEOUT_S", "-5", "step_timeout_s (SPARKINFER_STEP_TIMEOUT_S): -5.0 must be a number of "
                                        "seconds > 0"),
    ("SPARKINFER_PING_INTERVAL_S", "6", "ping_interval_s (SPARKINFER_PING_INTERVAL_S) 6.0 must be less than "
                                        "worker_timeout_s (SPARKINFER_WORKER_TIMEOUT_S) 5.0, or an idle worker counts "
                                        "as dead between two pings"),
    ("SPARKINFER_ASYNC_SCHEDULING", "2", "async_scheduling (SPARKINFER_ASYNC_SCHEDULING): 2 must be 0 or 1"),
    ("SPARKINFER_GRPC_PORT", "70000", "grpc_port (SPARKINFER_GRPC_PORT): 70000 is not a port number (0-65535; 0 = "
                                      "any free port)"),
    ("SPARKINFER_SCHEDULER_METRICS_PORT", "-1", "metrics_port (SPARKINFER_SCHEDULER_METRICS_PORT): -1 is not a port "
                                                "number (0-65535; 0 = off)"),
    ("SPARKINFER_DRAIN_GRACE_S", "inf", "drain_grace_s (SPARKINFER_DRAIN_GRACE_S): inf must be a number of seconds "
                                        ">= 0"),
], ids=["ping-0", "timeout-nan", "step-timeout-negative", "ping-past-timeout", "async-2", "grpc-port", "metrics-port",
        "drain-inf"])
def test_scheduler_refuses_a_value_out_of_range(capsys, name, value, line):
    with pytest.raises(SystemExit) as stop:
        scheduler_config.parse_config([], environ={name: value})
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"python -m scheduler.server: error: {line}"


@pytest.mark.parametrize("value", ["LOUD", "10"])
def test_scheduler_refuses_an_unknown_log_level(value):
    with pytest.raises(SystemExit) as stop:
        scheduler_config.log_level({"SPARKINFER_LOG_LEVEL": value})
    assert stop.value.code == (f"scheduler: SPARKINFER_LOG_LEVEL={value!r} is not a logging level (DEBUG, INFO, "
                               f"WARNING, ERROR, CRITICAL)")


def test_scheduler_log_level_in_any_case():
    assert scheduler_config.log_level({"SPARKINFER_LOG_LEVEL": "debug"}) == 10
    assert scheduler_config.log_level({}) == 20


@pytest.mark.parametrize("name, value, line", [
    ("SPARKINFER_DTYPE", "fp8", "dtype (SPARKINFER_DTYPE): 'fp8' is not one of float32, bfloat16, float16"),
    ("SPARKINFER_GDN_STATE_DTYPE", "int8", "state_dtype (SPARKINFER_GDN_STATE_DTYPE): 'int8' is not float32 or "
                                           "bfloat16"),
    ("SPARKINFER_DEVICE", "banana", "device (SPARKINFER_DEVICE): 'banana' is not a torch device (cpu, cuda, cuda:N)"),
    ("SPARKINFER_DEVICE", "cuda:99", "device (SPARKINFER_DEVICE): 'cuda:99' "),
    ("SPARKINFER_BLOCK_SIZE", "0", "block_size (SPARKINFER_BLOCK_SIZE): 0 must be > 0"),
    ("SPARKINFER_NUM_STATE_SLOTS", "-1", "num_state_slots (SPARKINFER_NUM_STATE_SLOTS): -1 must be > 0"),
    ("SPARKINFER_NUM_KV_BLOCKS", "-1", "num_kv_blocks (SPARKINFER_NUM_KV_BLOCKS): -1 must be >= 0 (0 = from "
                                       "kv_cache_mib)"),
    ("SPARKINFER_KV_CACHE_MIB", "-5", "kv_cache_mib (SPARKINFER_KV_CACHE_MIB): -5 must be >= 0 (0 = auto)"),
    ("SPARKINFER_NUM_THREADS", "-2", "num_threads (SPARKINFER_NUM_THREADS): -2 must be >= 0 (0 = all cores but two)"),
    ("SPARKINFER_SAMPLER_SEED", "-1", "sampler_seed (SPARKINFER_SAMPLER_SEED): -1 must be in [0, 2^64) (0 = random)"),
    ("SPARKINFER_WORKER_ADDR", "garbage", "worker_addr (SPARKINFER_WORKER_ADDR): 'garbage' is not tcp://host:port"),
    ("SPARKINFER_DRAIN_GRACE_S", "nan", "drain_grace_s (SPARKINFER_DRAIN_GRACE_S): nan must be a number of seconds "
                                        ">= 0"),
], ids=["dtype", "state-dtype", "device-name", "device-index", "block-size", "state-slots", "kv-blocks", "kv-mib",
        "threads", "seed", "worker-addr", "drain-nan"])
def test_worker_refuses_a_value_out_of_range(capsys, name, value, line):
    with pytest.raises(SystemExit) as stop:
        worker_server.parse_config([], environ={name: value})
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"python -m worker.server: error: {line}")


@pytest.mark.parametrize("name, value, line", [
    ("SPARKINFER_PORT", "70000", "--port (SPARKINFER_PORT): 70000 is not a port number (1-65535)"),
    ("SPARKINFER_SSE_KEEPALIVE_SECONDS", "0", "--sse-keepalive-seconds (SPARKINFER_SSE_KEEPALIVE_SECONDS): 0.0 must "
                                              "be a number of seconds > 0"),
    ("SPARKINFER_DRAIN_GRACE_S", "-1", "--drain-grace-seconds (SPARKINFER_DRAIN_GRACE_S): -1.0 must be a number of "
                                       "seconds >= 0"),
    ("SPARKINFER_GATEWAY_CPU_THREADS", "0", "SPARKINFER_GATEWAY_CPU_THREADS='0' must be >= 1"),
    ("SPARKINFER_GRAMMAR_MAX_STRING", "-1", "SPARKINFER_GRAMMAR_MAX_STRING='-1' must be >= 0 (0 = unbounded)"),
    ("SPARKINFER_API_KEY", " , ", "--api-key (SPARKINFER_API_KEY): ' , ' holds no key, only blanks and commas: every "
                                  "request would be a 401"),
    ("SPARKINFER_API_KEY", " ", "--api-key (SPARKINFER_API_KEY): ' ' holds no key, only blanks and commas: every "
                                "request would be a 401"),
], ids=["port", "keepalive-0", "drain-negative", "cpu-threads-0", "grammar-max-string-negative", "api-key-commas",
        "api-key-blank"])
def test_gateway_refuses_a_value_out_of_range(monkeypatch, capsys, name, value, line):
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as stop:
        gateway_config.parse_config([])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"python -m gateway.app: error: {line}"


def test_values_in_range_pass():
    assert gateway_config.parse_config(["--api-key", " ,alpha, "]).api_key == " ,alpha, "
    assert gateway_config.parse_config(["--api-key", ""]).api_key == ""  # no key: every route open
    assert scheduler_config.parse_config([], environ={"SPARKINFER_PING_INTERVAL_S": "0.1",
                                                      "SPARKINFER_GRPC_PORT": "0"}).ping_interval_s == 0.1
    assert worker_server.parse_config([], environ={"SPARKINFER_DEVICE": "cpu", "SPARKINFER_DTYPE": "bfloat16",
                                                   "SPARKINFER_SAMPLER_SEED": str(2 ** 64 - 1)}).device == "cpu"


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_launcher_refuses_a_wait_timeout_out_of_range(monkeypatch, capsys, value):
    """It started scheduler, worker and gateway only to stop them at once: 'the stack was not healthy after -1 s'."""
    monkeypatch.setenv("SPARKINFER_LAUNCH_TIMEOUT_S", value)
    with pytest.raises(SystemExit) as stop:
        launch.parse_args([])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m deploy.launch: error: --wait-timeout (SPARKINFER_LAUNCH_TIMEOUT_S): {float(value)!r} must be a "
        f"number of seconds > 0")


@pytest.mark.parametrize("value", ["-1", "nan", "-inf"])
def test_launcher_refuses_a_worker_hung_period_out_of_range(monkeypatch, capsys, value):
    """deploy/watchdog.py read -1 and nan as "never" without a word; README's row gives 0 for that."""
    monkeypatch.setenv("SPARKINFER_WORKER_HUNG_S", value)
    with pytest.raises(SystemExit) as stop:
        launch.parse_args([])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m deploy.launch: error: --worker-hung-s (SPARKINFER_WORKER_HUNG_S): {float(value)!r} must be a "
        f"number of seconds >= 0 (0 = never)")


def test_launcher_reads_a_worker_hung_period_of_0_as_never(monkeypatch):
    monkeypatch.setenv("SPARKINFER_WORKER_HUNG_S", "0")
    assert launch.parse_args([]).worker_hung_s == 0.0


@pytest.mark.parametrize("value", ["127.0.0.1:99999", "localhost", "http://127.0.0.1:50051", "scheduler:0", " :50051"],
                         ids=["port-past-65535", "no-port", "url", "port-0", "no-host"])
def test_gateway_refuses_a_scheduler_address_grpc_would_misread(monkeypatch, capsys, value):
    """grpc took 127.0.0.1:99999 as port 34463 (modulo 65536), `localhost` as port 443 and a URL as a host name to look
    up: the gateway started, and every request was a 503 'the model server is unavailable: ...' naming another port."""
    monkeypatch.setenv("SPARKINFER_SCHEDULER_ADDR", value)
    with pytest.raises(SystemExit) as stop:
        gateway_config.parse_config([])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m gateway.app: error: --scheduler-addr (SPARKINFER_SCHEDULER_ADDR): {value!r} is not host:port with "
        f"a port of 1-65535 (127.0.0.1:50051, scheduler:50051; no http://), nor a gRPC target such as "
        f"dns:///scheduler:50051 or unix:/path")


@pytest.mark.parametrize("value", ["127.0.0.1:50051", "sparkinfer-scheduler:50051", "[::1]:50051",
                                   "dns:///scheduler:50051", "unix:/run/scheduler.sock"])
def test_gateway_reads_a_scheduler_address_grpc_reads(monkeypatch, value):
    monkeypatch.setenv("SPARKINFER_SCHEDULER_ADDR", value)
    assert gateway_config.parse_config([]).scheduler_addr == value
