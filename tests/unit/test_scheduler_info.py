"""Unit tests: the scheduler's Info RPC gives the context a worker's KV pool allows, and nothing before a worker."""
import asyncio

import grpc
import pytest
from prometheus_client import CollectorRegistry

from gateway.fake_scheduler import LOCAL_SUBCHANNELS, start_fake_server
from proto import pb, pb_grpc
from proto.wire_version import WIRE_VERSION
from scheduler.config import SchedulerConfig
from scheduler.engine import Engine
from scheduler.metrics import Metrics
from scheduler.server import ServingServicer
from tests.unit.test_scheduler_engine import FakeLink

# The checkpoint says 8192; the fake worker's pool holds 64 blocks x 16 = 1024 tokens.
CARD = {"model_id": "tiny", "max_context_len": 8192, "eos_token_ids": [999], "vocab_size": 1000,
        "tokenizer_json": b"{}", "chat_template": "", "generation_config_json": "{}", "architecture": "x",
        "num_parameters": 1}


async def test_info_waits_for_a_worker_then_gives_the_pool_capped_context():
    """A gateway caches the card: given the checkpoint's context before the worker's hello, it kept 8192 while the
    scheduler cut every request at the pool's size, so a request over it got 200 + "length" instead of a 400."""
    link = FakeLink()
    link.auto = False                      # no worker answers the pings: it says hello below
    engine = Engine(SchedulerConfig(ping_interval_s=0.02, worker_timeout_s=5.0), CARD, link,
                    Metrics(CollectorRegistry()))
    engine.start()
    server, addr = await start_fake_server(ServingServicer(engine, CARD, "/nonexistent"))
    async with grpc.aio.insecure_channel(addr, options=LOCAL_SUBCHANNELS) as channel:
        stub = pb_grpc.ServingStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as early:
            await stub.Info(pb.InfoRequest())
        assert early.value.code() == grpc.StatusCode.UNAVAILABLE and "context length" in early.value.details()
        link.inbox.put_nowait(pb.WorkerMessage(hello=pb.WorkerHello(
            num_blocks=64, block_size=16, num_slots=4, max_context_len=8192, worker_id="w1", vocab_size=1000,
            nonce=1, wire_version=WIRE_VERSION)))
        await asyncio.wait_for(engine.alive_event.wait(), 1)
        info = await stub.Info(pb.InfoRequest())
        assert info.max_context_len == 1024 and info.model_id == "tiny"
    await server.stop(None)
    await engine.stop()
