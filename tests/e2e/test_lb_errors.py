"""End to end: compose's nginx load balancer (deploy/nginx.conf, run here with its upstream moved to loopback) in front
of no gateway, and of a real gateway. With no gateway answering (all restarting or stopped) nginx answered its HTML
"502 Bad Gateway" page, which the OpenAI, Ollama and Anthropic clients showed as their error message; now it is a 503
with Retry-After in the error shape the gateway itself gives on that path, and a gateway's own errors pass through."""
import os
import re
import shutil
import subprocess
import time

import httpx
import pytest

from gateway.llama_cpp_shape import LLAMA_CPP_PATHS
from tests.e2e.stack import REPO, GatewayProcess, free_port, kill

PATHS = ["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/models", "/v1/messages",
         "/v1/messages/count_tokens", "/api/chat", "/api/generate", "/api/tags", "/api/v0/chat/completions",
         "/api/v1/chat", "/slots/0", *sorted(LLAMA_CPP_PATHS), "/props/"]


class Nginx:
    """nginx with deploy/nginx.conf, listening on a free loopback port and proxying to 127.0.0.1:upstream_port."""

    def __init__(self, folder, upstream_port: int):
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(REPO, "deploy", "nginx.conf"), encoding="utf-8") as f:
            conf = f.read()
        self.port = free_port()
        prefix = f"daemon off;\nmaster_process off;\npid {folder}/nginx.pid;\nerror_log {folder}/error.log;\n"
        temp = " ".join(f"{name}_temp_path {folder}/{name};" for name in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                         "scgi"))
        conf = prefix + conf.replace("http {", f"http {{\n  {temp} access_log off;", 1)
        conf = conf.replace("http://gateway:8080", f"http://127.0.0.1:{upstream_port}")
        conf = re.sub(r"listen 8080;", f"listen 127.0.0.1:{self.port};", conf)
        path = os.path.join(folder, "nginx.conf")
        with open(path, "w", encoding="utf-8") as f:
            f.write(conf)
        self.proc = subprocess.Popen([shutil.which("nginx"), "-c", path, "-p", str(folder)], start_new_session=True,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                httpx.get(self.url, timeout=1)
                return
            except httpx.TransportError:
                assert self.proc.poll() is None, open(os.path.join(folder, "error.log")).read()
                time.sleep(0.05)
        raise AssertionError("nginx did not listen")

    def close(self) -> None:
        kill(self.proc)


def shape(value):
    """The structure of an error body: its keys, nested, and each leaf's JSON type (text replaced)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    return type(value).__name__


def within(small, large) -> bool:
    """Whether every key of shape `small` is in `large` with the same shape (a 400 may name its param too)."""
    if isinstance(small, dict):
        return isinstance(large, dict) and all(key in large and within(item, large[key]) for key, item in small.items())
    return small == large


def error_fields(body: dict) -> dict:
    """The machine-read fields of an error (its type and code), without the message."""
    error = body.get("error")
    return {key: error[key] for key in ("type", "code") if key in error} if isinstance(error, dict) else {}


@pytest.fixture
def gateway_without_scheduler(tmp_path):
    """A gateway whose scheduler address answers nothing: every generation is its 503 in the path's API shape."""
    class Dead:
        grpc_addr = f"127.0.0.1:{free_port()}"
        log_dir = str(tmp_path)

    gateway = GatewayProcess(Dead())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{gateway.url}/version", timeout=1)
            break
        except httpx.TransportError:
            time.sleep(0.1)
    yield gateway
    gateway.close()


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")
def test_no_gateway_is_a_503_in_each_apis_shape_and_a_gateways_errors_pass_through(tmp_path, gateway_without_scheduler):
    gateway = gateway_without_scheduler
    down = Nginx(tmp_path / "down", free_port())
    up = Nginx(tmp_path / "up", gateway.port)
    try:
        for path in PATHS:
            own = httpx.post(gateway.url + path, json={}, timeout=10)
            lb = httpx.post(down.url + path, json={}, timeout=10)
            assert lb.status_code == 503 and lb.headers["retry-after"] == "1", (path, lb.text)
            assert lb.headers["content-type"] == "application/json", (path, lb.text)
            assert within(shape(lb.json()), shape(own.json())), (path, lb.text, own.text)
            if own.status_code == 503:
                assert shape(lb.json()) == shape(own.json()), (path, lb.text, own.text)
                assert error_fields(lb.json()) == error_fields(own.json()), (path, lb.text, own.text)
            if path.startswith("/v1/messages"):
                assert lb.headers["request-id"] == lb.json()["request_id"]
            passed = httpx.post(up.url + path, json={}, timeout=10)
            assert (passed.status_code, shape(passed.json())) == (own.status_code, shape(own.json())), path
            assert passed.json().get("error") != lb.json().get("error")
    finally:
        down.close()
        up.close()
