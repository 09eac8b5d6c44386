"""GET /v1/info and GET /v1/capacity (gateway/capacity.py), the released engine's state routes, over the fake
scheduler: their fields follow the scheduler's Load and the model card, they need the API key as /v1 does, and they
are a 503 in the OpenAI error shape without a scheduler; vLLM's GET /load counts the requests in progress."""
import asyncio

import orjson

from gateway.app import create_app
from gateway.client import SchedulerClient
from gateway.config import GatewayConfig
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway, start_test_client
from proto import pb


async def test_info_reports_the_card_and_the_live_worker():
    fake = FakeServing(build_tokenizer(), max_context_len=300)
    async with fake_gateway(fake) as (client, _):
        body = await (await client.get("/v1/info")).json()
        assert body == {"model": "fake-model", "max_context": 300, "max_output_tokens": 299, "tp": 1,
                        "devices": ["cuda:0 (fake)"], "healthy": True, "architecture": "qwen3_5",
                        "quantization": "bf16", "num_parameters": 1000}
        fake.worker_alive = False
        body = await (await client.get("/v1/info")).json()
        assert (body["devices"], body["healthy"]) == ([], False)


async def test_capacity_follows_the_schedulers_load():
    fake = FakeServing(build_tokenizer())
    load = pb.LoadResponse(num_running=3, num_waiting=2, num_free_blocks=40, num_total_blocks=64, worker_alive=True,
                           max_num_seqs=4, max_queue_depth=2)

    async def Load(request, context):
        return load

    fake.Load = Load
    async with fake_gateway(fake) as (client, _):
        body = await (await client.get("/v1/capacity")).json()
        assert body == {"active_requests": 3, "waiting_requests": 2, "free_kv_blocks": 40, "total_kv_blocks": 64,
                        "max_num_seqs": 4, "max_queue_depth": 2, "accepting_requests": False}
        load.num_waiting = 1
        assert (await (await client.get("/v1/capacity")).json())["accepting_requests"] is True
        load.draining = True
        assert (await (await client.get("/v1/capacity")).json())["accepting_requests"] is False
        load.draining, load.max_queue_depth, load.num_waiting = False, 0, 500
        assert (await (await client.get("/v1/capacity")).json())["accepting_requests"] is True


async def test_both_need_the_key_and_are_503_without_a_scheduler():
    async with fake_gateway(FakeServing(build_tokenizer()), api_key="s3cret") as (client, _):
        for path in ("/v1/info", "/v1/capacity"):
            response = await client.get(path)
            assert response.status == 401, path
            response = await client.get(path, headers={"Authorization": "Bearer s3cret"})
            assert response.status == 200, path
    client = await start_test_client(create_app(GatewayConfig(scheduler_addr="127.0.0.1:1"),
                                                SchedulerClient("127.0.0.1:1")))
    try:
        for path in ("/v1/info", "/v1/capacity"):
            response = await client.get(path)
            error = (await response.json())["error"]
            assert response.status == 503 and error["message"], path
    finally:
        await client.close()


async def test_vllms_load_counts_the_requests_in_progress():
    fake = FakeServing(build_tokenizer())
    fake.script.reply, fake.script.delay_s = " ".join(str(i) for i in range(100)), 0.02
    async with fake_gateway(fake) as (client, _):
        assert await (await client.get("/load")).json() == {"server_load": 0}
        task = asyncio.create_task(client.post("/v1/completions", data=orjson.dumps({"prompt": "hi",
                                                                                   "max_tokens": 50})))
        for _ in range(500):
            if fake.script.requests:
                break
            await asyncio.sleep(0.01)
        assert await (await client.get("/load")).json() == {"server_load": 1}
        await (await task).read()
        assert await (await client.get("/load")).json() == {"server_load": 0}
