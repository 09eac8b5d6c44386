"""Unit tests: a numeric SPARKINFER_* variable that is no number stops the gateway, scheduler, worker and launcher at
their start with a line naming it (it was a ValueError traceback, or for the CPU pool and the grammar bound a 500 on
every request)."""
import pytest

from deploy import launch
from gateway.config import GatewayConfig, parse_config


@pytest.mark.parametrize("name, value, words", [
    ("SPARKINFER_PORT", "80a", "SPARKINFER_PORT='80a' is not an integer"),
    ("SPARKINFER_SSE_KEEPALIVE_SECONDS", "soon", "SPARKINFER_SSE_KEEPALIVE_SECONDS='soon' is not a number"),
    ("SPARKINFER_DRAIN_GRACE_S", "30s", "SPARKINFER_DRAIN_GRACE_S='30s' is not a number"),
    ("SPARKINFER_GATEWAY_CPU_THREADS", "four", "SPARKINFER_GATEWAY_CPU_THREADS='four' is not an integer"),
    ("SPARKINFER_GRAMMAR_MAX_STRING", "1.5", "SPARKINFER_GRAMMAR_MAX_STRING='1.5' is not an integer"),
], ids=["port", "keepalive", "drain", "cpu-threads", "grammar-max-string"])
def test_gateway_names_a_variable_that_is_no_number(monkeypatch, capsys, name, value, words):
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as stop:
        parse_config([])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"python -m gateway.app: error: {words}"


def test_gateway_reads_numbers_from_the_environment(monkeypatch):
    monkeypatch.setenv("SPARKINFER_PORT", "8081")
    monkeypatch.setenv("SPARKINFER_DRAIN_GRACE_S", "2.5")
    config = parse_config([])
    assert (config.port, config.drain_grace_s, config.sse_keepalive_s) == (8081, 2.5, GatewayConfig.sse_keepalive_s)


def test_launcher_names_a_wait_timeout_that_is_no_number(monkeypatch, capsys):
    monkeypatch.setenv("SPARKINFER_LAUNCH_TIMEOUT_S", "10m")
    with pytest.raises(SystemExit):
        launch.parse_args([])
    assert capsys.readouterr().err.splitlines()[-1] == \
        "python -m deploy.launch: error: SPARKINFER_LAUNCH_TIMEOUT_S='10m' is not a number"


def test_launcher_stops_with_the_default_drain_when_the_gateway_refused_the_value():
    assert launch.drain_grace_s({"SPARKINFER_DRAIN_GRACE_S": "30s"}) == GatewayConfig.drain_grace_s
    assert launch.drain_grace_s({"SPARKINFER_DRAIN_GRACE_S": "2"}) == 2.0


@pytest.mark.parametrize("module, name, value, words", [
    ("scheduler.config", "SPARKINFER_ASYNC_SCHEDULING", "yes",
     "python -m scheduler.server: error: async_scheduling (SPARKINFER_ASYNC_SCHEDULING): 'yes' is not an integer"),
    ("scheduler.config", "SPARKINFER_STEP_TIMEOUT_S", "1m",
     "python -m scheduler.server: error: step_timeout_s (SPARKINFER_STEP_TIMEOUT_S): '1m' is not a number"),
    ("worker.server", "SPARKINFER_NUM_STATE_SLOTS", "many",
     "python -m worker.server: error: num_state_slots (SPARKINFER_NUM_STATE_SLOTS): 'many' is not an integer"),
], ids=["scheduler-int", "scheduler-float", "worker-int"])
def test_scheduler_and_worker_say_what_a_value_is_not_as_the_gateway_does(capsys, module, name, value, words):
    """They said "'yes' is not a int" (the Python type's name); the gateway's words are "an integer" / "a number"."""
    parse = __import__(module, fromlist=["parse_config"]).parse_config
    with pytest.raises(SystemExit):
        parse([], environ={name: value})
    assert capsys.readouterr().err.splitlines()[-1] == words


@pytest.mark.parametrize("module, call, name, value", [
    ("gateway.config", "parse_config", "SPARKINFER_BODY_TIMEOUT_S", "0"),
    ("scheduler.config", "parse_config", "SPARKINFER_DRAIN_GRACE_S", "-1"),
    ("worker.server", "parse_config", "SPARKINFER_DTYPE", "float8"),
    ("deploy.launch", "parse_args", "SPARKINFER_LAUNCH_TIMEOUT_S", "10m"),
], ids=["gateway", "scheduler", "worker", "launcher"])
def test_a_bad_value_is_one_line_without_the_usage_of_flags(monkeypatch, capsys, module, call, name, value):
    """README: a bad value "stops it with one line naming the variable and what it accepts". argparse's usage of every
    flag came first (14-20 lines a process, under `make run`), for a variable the user set, no flag they passed."""
    monkeypatch.setenv(name, value)
    parse = getattr(__import__(module, fromlist=[call]), call)
    with pytest.raises(SystemExit) as stop:
        parse([])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and name in err and err.startswith(f"python -m {module.split('.')[0]}"), err
