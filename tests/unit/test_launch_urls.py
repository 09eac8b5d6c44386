"""Unit tests: the launcher's URL for the gateway (its health probe and banner), and the scheduler's metrics bind."""
import socket
import urllib.request

import pytest

from deploy.launch import base_url
from scheduler.metrics import serve_metrics


@pytest.mark.parametrize("host, url", [
    ("127.0.0.1", "http://127.0.0.1:8080"), ("0.0.0.0", "http://127.0.0.1:8080"), ("::", "http://127.0.0.1:8080"),
    ("", "http://127.0.0.1:8080"), ("::1", "http://[::1]:8080"), ("localhost", "http://localhost:8080"),
], ids=["loopback", "any-ipv4", "any-ipv6", "empty", "ipv6-loopback", "name"])
def test_base_url_is_one_a_client_can_open(host, url):
    assert base_url({"SPARKINFER_HOST": host, "SPARKINFER_PORT": "8080"}) == url


def _listening_addresses(port: int) -> set:
    """Local IPv4 addresses listening on port, from /proc/net/tcp (state 0A = LISTEN)."""
    found = set()
    with open("/proc/net/tcp") as table:
        for line in list(table)[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


def test_scheduler_metrics_listen_on_the_grpc_host_only():
    """prometheus_client binds 0.0.0.0 by default: `make run` put its metrics on every interface."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve_metrics("127.0.0.1", port)
    assert _listening_addresses(port) == {"127.0.0.1"}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        assert b"python_info" in reply.read()
