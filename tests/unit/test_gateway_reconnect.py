"""Unit tests: a gateway whose scheduler was down for a while serves again within about a second of its return.

gRPC waits longer and longer between reconnects to an unreachable server (1 s, 1.6 s, 2.6 s, 4.1 s, ... up to 120 s) and
fails every call made while it waits, so the gateway answered 503 for seconds to minutes after the scheduler was back
(grpc/grpc#29996; measured here: 11 s after a 30 s outage). The "scheduler" is first a TCP listener that accepts and
drops every connection (each accept is one reconnect attempt), then the fake Serving on the same port.
"""
import asyncio
import time

import grpc
import orjson

from gateway.app import create_app
from gateway.client import SchedulerClient
from gateway.config import GatewayConfig
from gateway.fake_scheduler import NO_REUSEPORT, FakeServing, build_tokenizer, start_test_client
from proto import pb_grpc

# Attempts seen before the scheduler comes back: with gRPC's default backoff the next one is 4.1 s (+-20%) later.
NUM_FAILED_ATTEMPTS = 4
BACK_WITHIN_S = 2.0


async def _poll_health(client, until_status: int, seconds: float) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        response = await client.get("/health")
        body = orjson.loads(await response.read())
        if response.status == until_status or time.monotonic() > deadline:
            return {**body, "http": response.status}
        await asyncio.sleep(0.05)


async def test_the_gateway_serves_again_soon_after_the_scheduler_returns():
    attempts = []

    async def drop(reader, writer):
        attempts.append(time.monotonic())
        writer.close()

    down = await asyncio.start_server(drop, "127.0.0.1", 0)
    port = down.sockets[0].getsockname()[1]
    addr = f"127.0.0.1:{port}"
    client = await start_test_client(create_app(GatewayConfig(scheduler_addr=addr), SchedulerClient(addr)))
    server = None
    try:
        deadline = time.monotonic() + 30
        while len(attempts) < NUM_FAILED_ATTEMPTS and time.monotonic() < deadline:
            health = await _poll_health(client, 200, 0)
            assert health["http"] == 503 and health["reason"] == "scheduler_unreachable"
            await asyncio.sleep(0.05)
        assert len(attempts) >= NUM_FAILED_ATTEMPTS
        down.close()
        await down.wait_closed()
        server = grpc.aio.server(options=NO_REUSEPORT)
        pb_grpc.add_ServingServicer_to_server(FakeServing(build_tokenizer()), server)
        assert server.add_insecure_port(addr) == port
        await server.start()
        back = time.monotonic()
        health = await _poll_health(client, 200, 10.0)
        served_after = time.monotonic() - back
        assert health["http"] == 200 and health["model"] == "fake-model", health
        assert served_after < BACK_WITHIN_S, f"503 for {served_after:.2f} s after the scheduler was back"
        response = await client.post("/v1/completions", data=orjson.dumps({"prompt": "hi", "max_tokens": 2}))
        assert response.status == 200
        assert orjson.loads(await response.read())["usage"]["completion_tokens"] == 2
    finally:
        await client.close()
        if server is not None:
            await server.stop(None)
