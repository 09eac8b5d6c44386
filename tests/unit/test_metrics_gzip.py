"""/metrics answers gzipped when the scrape accepts it, as prometheus_client's own handler answers (vLLM's /metrics, the
scheduler's here): Prometheus sends `Accept-Encoding: gzip` on every scrape, and the gateway's answer came back plain,
its text several times the bytes. A scrape that does not accept gzip gets the text as it was; name[] still applies."""
import gzip
import socket
import urllib.request

import aiohttp
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from scheduler.metrics import serve_metrics

TOKENIZER = build_tokenizer()
# Series whose values a scrape does not change (http_requests_total counts each scrape).
NAMES = ("sparkinfer_gateway_scheduler_up", "sparkinfer_gateway_requests_in_flight", "sparkinfer_num_requests_running")
QUERY = "?" + "&".join(f"name[]={name}" for name in NAMES)


async def _get(session: aiohttp.ClientSession, url: str, encoding: str) -> tuple[str, bytes]:
    async with session.get(url, headers={"Accept-Encoding": encoding}) as reply:
        assert reply.status == 200
        return reply.headers.get("Content-Encoding", ""), await reply.read()


@pytest.mark.parametrize("accept", ["gzip", "deflate, gzip;q=0.8", "GZIP, br"], ids=["gzip", "listed", "upper"])
async def test_gateway_metrics_are_gzipped_when_the_scrape_accepts_it(accept):
    async with fake_gateway(FakeServing(TOKENIZER)) as (client, _):
        # Once the model card is in, every series carries model_name (before it, none does).
        assert (await client.get("/v1/models")).status == 200
        # The test client's own session would decompress the body: this one leaves it as it came.
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            url = str(client.make_url("/metrics" + QUERY))
            plain_encoding, plain = await _get(session, url, "identity")
            encoding, zipped = await _get(session, url, accept)
    assert plain_encoding == "" and plain.startswith(b"# HELP sparkinfer_")
    assert encoding == "gzip" and zipped[:2] == b"\x1f\x8b"
    assert gzip.decompress(zipped) == plain
    assert sorted(line.split(b"{")[0] for line in plain.splitlines() if not line.startswith(b"#")) == \
        sorted(name.encode() for name in NAMES)


def _scheduler_scrape(port: int, encoding: str) -> tuple[str, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics?name[]=python_info",
                                     headers={"Accept-Encoding": encoding})
    with urllib.request.urlopen(request, timeout=5) as reply:
        return reply.headers.get("Content-Encoding", ""), reply.read()


def test_scheduler_metrics_are_gzipped_when_the_scrape_accepts_it():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve_metrics("127.0.0.1", port, "my-model")
    plain_encoding, plain = _scheduler_scrape(port, "identity")
    encoding, zipped = _scheduler_scrape(port, "gzip")
    assert plain_encoding == "" and plain.startswith(b"# HELP python_info")
    assert encoding == "gzip" and gzip.decompress(zipped) == plain
