"""GET /v1/health answers as /health, without an API key, as llama.cpp's server serves it (tools/server/server.cpp
registers /health and /v1/health to one handler, both public): a client whose base URL ends in /v1 probes it there."""
from gateway.app import create_app
from gateway.client import SchedulerClient
from gateway.config import GatewayConfig
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway, start_fake_server, start_test_client


async def test_v1_health_is_health_and_needs_no_key():
    server, addr = await start_fake_server(FakeServing(build_tokenizer()))
    client = await start_test_client(create_app(GatewayConfig(scheduler_addr=addr, api_key="s3cret"),
                                                SchedulerClient(addr)))
    try:
        health = await client.get("/health")
        v1 = await client.get("/v1/health")
        assert (v1.status, health.status) == (200, 200)
        assert await v1.json() == await health.json() and (await v1.json())["status"] == "ok"
    finally:
        await client.close()
        await server.stop(None)


async def test_v1_health_is_503_without_a_scheduler():
    client = await start_test_client(create_app(GatewayConfig(scheduler_addr="127.0.0.1:1"),
                                                SchedulerClient("127.0.0.1:1")))
    try:
        response = await client.get("/v1/health")
        body = await response.json()
        assert (response.status, body["status"], body["reason"]) == (503, "unhealthy", "scheduler_unreachable")
    finally:
        await client.close()


async def test_health_while_the_engine_comes_up_carries_llama_servers_loading_error():
    """llama-server's /health before its model is loaded is 503 {"error": {"code": 503, "message": "Loading model",
    "type": "unavailable_error"}}; clients tell a server that is starting from another listener's 503 by it (pensae's
    ModelCapabilityProbe reads it as STARTING, {"status": "maintenance"} as an unknown listener)."""
    client = await start_test_client(create_app(GatewayConfig(scheduler_addr="127.0.0.1:1"),
                                                SchedulerClient("127.0.0.1:1")))
    try:
        response = await client.get("/health")
        body = await response.json()
        assert response.status == 503 and body["reason"] == "scheduler_unreachable"
        assert body["error"] == {"code": 503, "message": "Loading model", "type": "unavailable_error"}
    finally:
        await client.close()


async def test_health_while_the_worker_loads_says_loading_model():
    fake = FakeServing(build_tokenizer())
    fake.worker_alive = False
    async with fake_gateway(fake) as (client, _):
        response = await client.get("/v1/health")
        body = await response.json()
    assert (response.status, body["reason"], body["error"]["message"]) == (503, "worker_down", "Loading model")
