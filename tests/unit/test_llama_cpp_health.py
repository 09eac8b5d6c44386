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


async def test_props_and_slots_are_llama_servers_loading_503_while_no_worker_runs():
    """llama-server answers every route but its model lists 503 "Loading model" until it can serve (server.cpp
    middleware_server_state): its web UI polls /props, and balancers /slots?fail_on_no_slot=1, to tell a server that
    serves. With the worker dead both answered 200, /slots with every seat free, so a balancer sent requests there."""
    fake = FakeServing(build_tokenizer())
    loading = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
    async with fake_gateway(fake) as (client, _):
        fake.worker_alive = False
        for path in ("/props", "/slots", "/slots?fail_on_no_slot=1"):
            response = await client.get(path)
            assert (response.status, await response.json()) == (503, loading), path
        fake.worker_alive = True
        slots, props = await client.get("/slots?fail_on_no_slot=1"), await client.get("/props")
        assert (slots.status, props.status) == (200, 200)
        assert (await slots.json())[0]["is_processing"] is False and "total_slots" in await props.json()


async def test_props_and_slots_are_the_loading_503_without_a_scheduler():
    client = await start_test_client(create_app(GatewayConfig(scheduler_addr="127.0.0.1:1"),
                                                SchedulerClient("127.0.0.1:1")))
    try:
        for path in ("/props", "/slots"):
            response = await client.get(path)
            assert response.status == 503 and (await response.json())["error"]["message"] == "Loading model", path
    finally:
        await client.close()
