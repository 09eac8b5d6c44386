"""Unit tests: the ports, paths and hosts compose.yaml, deploy/prometheus.yml, deploy/nginx.conf and deploy/k8s name
are the ones the processes listen on and the routes the gateway serves: Prometheus scrapes each gateway on its
SPARKINFER_PORT and the scheduler on its SPARKINFER_SCHEDULER_METRICS_PORT, the health checks and probes ask paths
the gateway routes, and each Service's port reaches the container port its process binds."""
import re
from pathlib import Path

import pytest
import yaml

from gateway.app import create_app
from gateway.config import GatewayConfig

ROOT = Path(__file__).resolve().parents[2]


def _yaml_docs(path: str) -> list:
    return [doc for doc in yaml.safe_load_all((ROOT / path).read_text()) if doc]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def gateway_paths() -> set:
    app = create_app(GatewayConfig())
    return {route.resource.canonical for route in app.router.routes() if route.method in ("GET", "*")}


def _env(service: dict) -> dict:
    return {key: str(value) for key, value in service["environment"].items()}


def test_prometheus_scrapes_the_ports_compose_serves_metrics_on(compose, gateway_paths):
    jobs = {job["job_name"]: job for job in yaml.safe_load((ROOT / "deploy/prometheus.yml").read_text())
            ["scrape_configs"]}
    gateway_sd = jobs["sparkinfer-gateway"]["dns_sd_configs"][0]
    assert gateway_sd["names"] == ["gateway"]
    assert str(gateway_sd["port"]) == _env(compose["services"]["gateway"])["SPARKINFER_PORT"]
    scheduler = _env(compose["services"]["scheduler"])
    assert jobs["sparkinfer-scheduler"]["static_configs"][0]["targets"] == \
        [f"scheduler:{scheduler['SPARKINFER_SCHEDULER_METRICS_PORT']}"]
    assert scheduler["SPARKINFER_SCHEDULER_METRICS_PORT"] in compose["services"]["scheduler"]["expose"]
    assert "/metrics" in gateway_paths and "metrics_path" not in jobs["sparkinfer-gateway"]


def test_compose_health_check_and_balancer_reach_the_gateway(compose, gateway_paths):
    gateway = compose["services"]["gateway"]
    port = _env(gateway)["SPARKINFER_PORT"]
    url = re.search(r"http://127\.0\.0\.1:(\d+)(/\S*?)'", " ".join(gateway["healthcheck"]["test"]))
    assert url.group(1) == port and url.group(2) in gateway_paths
    assert port in gateway["expose"]
    assert f"http://gateway:{port};" in (ROOT / "deploy/nginx.conf").read_text()


def _containers(kind: str) -> dict:
    docs = _yaml_docs(f"deploy/k8s/{kind}.yaml")
    workload = next(d for d in docs if d["kind"] in ("Deployment", "StatefulSet"))
    return {c["name"]: c for c in workload["spec"]["template"]["spec"]["containers"]}


def _container_port(container: dict, name: str) -> int:
    return next(p["containerPort"] for p in container["ports"] if p["name"] == name)


def _env_list(container: dict) -> dict:
    return {e["name"]: str(e["value"]) for e in container.get("env", [])}


def test_k8s_container_ports_are_the_ports_the_processes_bind(gateway_paths):
    gateway = _containers("gateway")["gateway"]
    assert str(_container_port(gateway, "http")) == _env_list(gateway)["SPARKINFER_PORT"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert gateway[probe]["httpGet"]["path"] in gateway_paths and gateway[probe]["httpGet"]["port"] == "http"
    scheduler = _containers("engine")["scheduler"]
    assert str(_container_port(scheduler, "metrics")) == _env_list(scheduler)["SPARKINFER_SCHEDULER_METRICS_PORT"]
    # The scheduler's gRPC port is its default (no SPARKINFER_GRPC_PORT set); the gateways dial it by the Service.
    assert "SPARKINFER_GRPC_PORT" not in _env_list(scheduler) and _container_port(scheduler, "grpc") == 50051
    assert scheduler["readinessProbe"]["grpc"]["port"] == 50051
    assert _env_list(gateway)["SPARKINFER_SCHEDULER_ADDR"] == "sparkinfer-scheduler:50051"


def test_servicemonitor_scrapes_named_service_ports_on_served_paths(gateway_paths):
    docs = _yaml_docs("deploy/k8s/gateway.yaml") + _yaml_docs("deploy/k8s/engine.yaml")
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    port_names = {p["name"] for s in services.values() for p in s["spec"]["ports"]}
    monitor = _yaml_docs("deploy/k8s/servicemonitor.yaml")[0]
    selected = set(monitor["spec"]["selector"]["matchExpressions"][0]["values"])
    assert selected == {s["metadata"]["labels"]["app"] for s in services.values()}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in port_names and endpoint["path"] == "/metrics"
    assert "/metrics" in gateway_paths


def test_the_balancers_own_503_exposes_the_headers_a_gateway_exposes():
    """nginx's 503 (no gateway answered) sends Anthropic's request-id on its routes, but exposed only Retry-After and
    X-Request-Id to browsers, where every gateway answer exposes request-id too (the Anthropic SDK in a browser reads
    it as _request_id)."""
    from gateway.cors import CORS_RESPONSE_HEADERS
    conf = (ROOT / "deploy/nginx.conf").read_text()
    exposed = re.findall(r'add_header Access-Control-Expose-Headers "([^"]*)" always;', conf)
    wanted = CORS_RESPONSE_HEADERS["Access-Control-Expose-Headers"]
    assert exposed and all(sorted(h.strip().lower() for h in e.split(",")) ==
                           sorted(h.strip().lower() for h in wanted.split(",")) for e in exposed), exposed


def test_the_engines_zeromq_sockets_stay_on_the_pods_loopback():
    """The worker reaches the scheduler over the Pod's loopback (its SPARKINFER_WORKER_ADDR), and the scheduler's step
    and result sockets take any peer, unauthenticated. Bound where the gRPC host says (0.0.0.0, for the gateways'
    calls), they took any pod of the cluster: on port 5557 it was handed steps (prompts) in turn with the worker, on
    5558 it could answer results and hellos in the worker's place."""
    from urllib.parse import urlsplit

    from scheduler.config import parse_config

    containers = _containers("engine")
    assert urlsplit(_env_list(containers["worker"])["SPARKINFER_WORKER_ADDR"]).hostname == "127.0.0.1"
    config = parse_config([], environ=_env_list(containers["scheduler"]))
    assert config.grpc_host == "0.0.0.0" and (config.worker_bind_host or config.grpc_host) == "127.0.0.1"


def _nginx_map_value(conf: str, source: str, target: str, value: str):
    """What `map source $target { ... }` gives for value (exact keys, then `~` regexes in order, then default), or
    None when the file has no such map."""
    found = re.search(rf"map\s+{re.escape(source)}\s+{re.escape(target)}\s*{{([^}}]*)}}", conf)
    if not found:
        return None
    entries = [re.match(r"\s*('[^']*'|\"[^\"]*\"|\S+)\s+('[^']*'|\"[^\"]*\"|\S+)\s*$", entry)
               for entry in found.group(1).split(";") if entry.strip()]
    table = [(key.strip("'\""), result.strip("'\"")) for key, result in (entry.groups() for entry in entries)]
    exact = {key: result for key, result in table if not key.startswith("~")}
    if value in exact:
        return exact[value]
    for key, result in table:
        if key.startswith("~") and re.search(key.lstrip("~*"), value, re.I if key.startswith("~*") else 0):
            return result
    return exact.get("default", "")


def test_the_balancer_passes_the_lm_studio_sdks_websockets_on():
    """LM Studio's SDKs (lmstudio-python's `lms.Client("host:8080")`, lmstudio-js) talk over a websocket a namespace
    (README routes table: /llm, /system, ...; gateway/lmstudio_sdk.py). nginx proxies HTTP/1.1 without the hop-by-hop
    Upgrade header and set `Connection ""`, so behind compose's load balancer every SDK call got a plain GET and
    failed. nginx's own recipe (https://nginx.org/en/docs/http/websocket.html): `proxy_set_header Upgrade
    $http_upgrade` and a Connection of "upgrade" when the client asked for one, mapped from $http_upgrade."""
    from gateway.route_hints import WEBSOCKET_ROUTE
    websockets = [route for route in create_app(GatewayConfig()).router.routes()
                  if (route.name or "").startswith(WEBSOCKET_ROUTE)]
    assert websockets, "the gateway serves the SDK's namespaces as websockets"
    conf = (ROOT / "deploy/nginx.conf").read_text()
    location = re.search(r"location\s+/\s*\{([^}]*)\}", conf).group(1)
    headers = dict(re.findall(r"proxy_set_header\s+(\S+)\s+('[^']*'|\"[^\"]*\"|[^;]+);", location))
    assert headers.get("Upgrade") == "$http_upgrade", headers
    connection = headers.get("Connection", "").strip("'\"")
    for upgrade, wanted in (("websocket", "upgrade"), ("", "")):
        value = _nginx_map_value(conf, "$http_upgrade", connection, upgrade) if connection.startswith("$") \
            else connection
        assert (value or "").lower() == wanted, (upgrade, connection, value)


def test_the_balancer_passes_on_the_host_the_client_asked():
    """A 404 whose path holds a base URL too many names the base URL to give instead, built from the request's Host
    (gateway/route_hints.py: Cherry Studio's http://host:11434/v1 given to an Ollama client). nginx sends
    `Host: $proxy_host` unless told otherwise (proxy_set_header in
    https://nginx.org/en/docs/http/ngx_http_proxy_module.html), so behind compose's load balancer the hint read "give
    it http://gateway:8080 instead", a name only the containers resolve; `$http_host` passes on the client's own
    Host, its port included."""
    from aiohttp.test_utils import make_mocked_request

    from gateway.route_hints import base_url_hint
    location = re.search(r"location\s+/\s*\{([^}]*)\}", (ROOT / "deploy/nginx.conf").read_text()).group(1)
    headers = dict(re.findall(r"proxy_set_header\s+(\S+)\s+('[^']*'|\"[^\"]*\"|[^;]+);", location))
    client_host = "localhost:8080"
    sent = {"$http_host": client_host, "$host": client_host.split(":")[0]}.get(headers.get("Host"), "gateway:8080")
    request = make_mocked_request("POST", "/v1/api/chat", headers={"Host": sent}, app=create_app(GatewayConfig()))
    assert "give it http://localhost:8080 instead" in base_url_hint(request), headers
