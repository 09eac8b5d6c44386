"""Unit tests: compose.yaml and deploy/k8s say what the processes do: every SPARKINFER_* variable they set is one a
process reads, the health checks are runnable Python, and a stopping gateway gets the time its drain takes (SIGTERM
drains for SPARKINFER_DRAIN_GRACE_S) and goes before the worker it needs."""
import os
import re
import subprocess

import pytest
import yaml

from gateway.config import GatewayConfig
from scheduler.config import SchedulerConfig

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Read by compose itself (the host folder mounted as /models), not by a process.
COMPOSE_ONLY = {"SPARKINFER_MODEL_DIR"}


def _read(*parts) -> str:
    with open(os.path.join(REPO, *parts), encoding="utf-8") as f:
        return f.read()


def _code_variables() -> set:
    names = set()
    for package in ("gateway", "scheduler", "worker", "deploy"):
        for folder, _, files in os.walk(os.path.join(REPO, package)):
            for name in files:
                if name.endswith(".py"):
                    names.update(re.findall(r"SPARKINFER_[A-Z0-9_]+", _read(folder, name)))
    return names


def _seconds(duration: str) -> float:
    return float(duration[:-1]) * {"s": 1, "m": 60}[duration[-1]]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(_read("compose.yaml"))


@pytest.mark.parametrize("path", ["compose.yaml", "deploy/k8s/engine.yaml", "deploy/k8s/gateway.yaml",
                                  "deploy/Dockerfile.gateway", "deploy/Dockerfile.scheduler", "deploy/Dockerfile.worker"])
def test_every_variable_set_is_read_by_a_process(path):
    used = set(re.findall(r"SPARKINFER_[A-Z0-9_]+", _read(*path.split("/")))) - COMPOSE_ONLY
    assert used - _code_variables() == set()


def test_compose_health_checks_are_python_that_compiles(compose):
    for name in ("scheduler", "gateway"):
        test = compose["services"][name]["healthcheck"]["test"]
        assert test[:3] == ["CMD", "python", "-c"]
        compile(test[3], f"{name} healthcheck", "exec")


def test_a_stopping_gateway_has_time_to_drain_before_the_worker_goes(compose):
    gateway = compose["services"]["gateway"]
    assert _seconds(gateway["stop_grace_period"]) > GatewayConfig.drain_grace_s
    # compose stops a service before those it depends on
    assert "worker" in gateway["depends_on"] and "scheduler" in gateway["depends_on"]
    k8s = next(doc for doc in yaml.safe_load_all(_read("deploy", "k8s", "gateway.yaml")) if doc["kind"] == "Deployment")
    assert k8s["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > GatewayConfig.drain_grace_s


def test_a_gateway_pod_serves_until_the_balancers_let_go_then_drains():
    """Kubernetes removes a deleted Pod from the Service's endpoints and sends SIGTERM at the same time; the balancers
    in front learn of the removal seconds later, and a gateway closes its port at its SIGTERM: the new connections
    sent meanwhile were refused. A preStop sleep keeps the gateway serving through that lag
    (kubernetes/kubernetes#43576; vLLM's Kubernetes deployment guide: terminationGracePeriodSeconds >= preStop sleep +
    drain), and the grace period still leaves the whole drain after it."""
    pod = next(doc for doc in yaml.safe_load_all(_read("deploy", "k8s", "gateway.yaml"))
               if doc["kind"] == "Deployment")["spec"]["template"]["spec"]
    gateway = next(container for container in pod["containers"] if container["name"] == "gateway")
    command = gateway["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep" and float(command[1]) >= 5
    assert pod["terminationGracePeriodSeconds"] > float(command[1]) + GatewayConfig.drain_grace_s


def test_a_gateway_pod_stays_ready_while_its_scheduler_is_down():
    """Every gateway replica shares the one scheduler: a readiness probe on /health (503 while the scheduler does not
    answer) took them all out of the Service at once, and clients got connection refused instead of the JSON 503 with
    Retry-After each API defines. The probes ask the gateway alone (/version answers without the scheduler), as vLLM
    production-stack's router is probed; the engine Pod keeps its gRPC health readiness."""
    pod = next(doc for doc in yaml.safe_load_all(_read("deploy", "k8s", "gateway.yaml"))
               if doc["kind"] == "Deployment")["spec"]["template"]["spec"]
    gateway = next(container for container in pod["containers"] if container["name"] == "gateway")
    assert gateway["readinessProbe"]["httpGet"]["path"] == "/version"
    assert gateway["livenessProbe"]["httpGet"]["path"] == "/version"
    engine = next(doc for doc in yaml.safe_load_all(_read("deploy", "k8s", "engine.yaml")) if doc["kind"] == "StatefulSet")
    scheduler = next(c for c in engine["spec"]["template"]["spec"]["containers"] if c["name"] == "scheduler")
    assert "grpc" in scheduler["readinessProbe"]


def test_the_compose_health_check_waits_as_long_as_health_does(compose):
    """/health waits up to HEALTH_LOAD_TIMEOUT_S for the scheduler's Load; a check that gives up sooner fails a gateway
    whose busy scheduler answers in time. compose's healthcheck (urlopen's timeout inside docker's) allows more."""
    from gateway.probe_routes import HEALTH_LOAD_TIMEOUT_S

    healthcheck = compose["services"]["gateway"]["healthcheck"]
    urlopen_timeout = float(re.search(r"timeout=([0-9.]+)", healthcheck["test"][3]).group(1))
    assert _seconds(healthcheck["timeout"]) > urlopen_timeout > HEALTH_LOAD_TIMEOUT_S


def test_the_load_balancer_lets_the_streams_it_proxies_finish(compose):
    """`docker compose stop` stops nginx first (it depends on the gateways); it then waits for the requests it proxies
    (SIGQUIT, measured on nginx 1.22: a stream went on to its [DONE]), but docker killed it after its default 10 s,
    cutting every stream the gateways behind it would still have drained for SPARKINFER_DRAIN_GRACE_S (30 s)."""
    lb = compose["services"]["lb"]
    assert "gateway" in lb["depends_on"]
    assert _seconds(lb["stop_grace_period"]) >= _seconds(compose["services"]["gateway"]["stop_grace_period"])


def test_a_stopping_engine_has_time_to_drain(compose):
    for name in ("scheduler", "worker"):
        assert _seconds(compose["services"][name]["stop_grace_period"]) > SchedulerConfig.drain_grace_s, name
    k8s = next(doc for doc in yaml.safe_load_all(_read("deploy", "k8s", "engine.yaml")) if doc["kind"] == "StatefulSet")
    assert k8s["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > SchedulerConfig.drain_grace_s


def test_long_running_services_restart(compose):
    for name, service in compose["services"].items():
        if name != "model-init":
            assert service.get("restart") == "unless-stopped", name


@pytest.mark.parametrize("model, writes", [("/models/tiny", True), ("/models/ckpt", False)], ids=["tiny", "real"])
def test_compose_model_init_writes_the_tiny_model_only_when_it_is_served(compose, tmp_path, model, writes):
    """It wrote models/tiny into SPARKINFER_MODEL_DIR, the user's folder of real checkpoints, whatever was served."""
    service = compose["services"]["model-init"]
    command = service["command"][2].replace("$$", "$")  # compose's interpolation
    stub = tmp_path / "python"
    stub.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/called\n')
    stub.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}", SPARKINFER_MODEL=model)
    assert service["environment"]["SPARKINFER_MODEL"] == "${SPARKINFER_MODEL:-/models/tiny}"
    subprocess.run(["sh", "-c", command], env=env, check=True, timeout=10)
    assert (tmp_path / "called").exists() == writes


def _nginx_bytes(size: str) -> int:
    return int(size[:-1]) * {"k": 1024, "m": 1024 * 1024}[size[-1].lower()] if size[-1].isalpha() else int(size)


def test_the_load_balancer_passes_on_what_a_gateway_accepts():
    """compose's nginx in front of the gateways: its defaults (1 MiB bodies, 8 KiB header fields) answered a long-context
    chat (1.5 MB) with an HTML 413 and a 20 KB Authorization header with an HTML 400, both of which the gateway serves
    (measured through this nginx.conf on nginx 1.22); every limit must be the gateway's, in the API's error shape."""
    from gateway.http_server import SERVER_OPTIONS

    conf = dict(re.findall(r"^\s*(client_max_body_size|large_client_header_buffers)\s+([^;]+);", _read(
        "deploy", "nginx.conf"), re.M))
    body_limit = _nginx_bytes(conf.get("client_max_body_size", "1m"))
    assert body_limit == 0 or body_limit >= GatewayConfig.max_body_bytes
    _, buffer_size = conf.get("large_client_header_buffers", "4 8k").split()
    assert _nginx_bytes(buffer_size) >= SERVER_OPTIONS["max_field_size"]


def test_the_workers_compiled_kernels_live_on_a_volume_that_outlives_a_restart(compose):
    """CuPy compiles each kernel module on first use (~1 s; the decode graphs' capture at start took 18.5 s on an empty
    cache against ~3 s on a filled one, worker/GPU_NOTES.md session 15): its cache dir must not be the container's
    own filesystem, which a restarted container loses."""
    env = re.search(r"^ENV CUPY_CACHE_DIR=(\S+)$", _read("deploy", "Dockerfile.worker"), re.M)
    assert env, "deploy/Dockerfile.worker sets no CUPY_CACHE_DIR"
    path = env.group(1)
    mounts = [v.split(":") for v in compose["services"]["worker"]["volumes"]]
    named = [m[0] for m in mounts if m[1] == path]
    assert named and named[0] in compose["volumes"], f"compose mounts no named volume at {path}"
    k8s = next(doc for doc in yaml.safe_load_all(_read("deploy", "k8s", "engine.yaml")) if doc["kind"] == "StatefulSet")
    pod = k8s["spec"]["template"]["spec"]
    worker = next(c for c in pod["containers"] if c["name"] == "worker")
    mount = next(m for m in worker["volumeMounts"] if m["mountPath"] == path)
    assert any(v["name"] == mount["name"] for v in pod["volumes"])


def test_compose_passes_on_the_access_and_size_variables_a_user_sets(compose):
    """`SPARKINFER_API_KEY=... docker compose up` protects the API as `make run` does: compose hands a container only
    the variables its file names, so a key set in the shell or .env served every route without one (and nginx
    publishes the port on every interface). Each variable compose takes from the host is named in README's compose
    paragraph, so a user knows which others need compose.yaml edited."""
    env = {name: service.get("environment", {}) for name, service in compose["services"].items()}
    for service, name in [("gateway", "SPARKINFER_API_KEY"), ("gateway", "SPARKINFER_ALLOWED_ORIGINS"),
                          ("gateway", "SPARKINFER_ALLOW_CREDENTIALS"), ("scheduler", "SPARKINFER_MAX_MODEL_LEN"),
                          ("scheduler", "SPARKINFER_MAX_NUM_SEQS")]:
        assert str(env[service].get(name, "")).startswith("${" + name), (service, name)
    readme = _read("README.md")
    paragraph = readme[readme.index("`compose.yaml` runs the same topology"):]
    paragraph = paragraph[:paragraph.index("\n\n")]
    for name in set(re.findall(r"\$\{(SPARKINFER_[A-Z0-9_]+)", _read("compose.yaml"))):
        assert f"`{name}`" in paragraph or name in ("SPARKINFER_MODEL", "SPARKINFER_MODEL_DIR"), name
