"""Unit tests: the scheduler's Generate says it admitted a request (initial metadata) before any token, and a
refused request ends without saying so."""
import asyncio

import grpc
import pytest

from gateway.client import GenerateStream
from gateway.fake_scheduler import LOCAL_SUBCHANNELS, start_fake_server
from proto import ADMITTED_METADATA_KEY, pb_grpc
from scheduler.server import ServingServicer
from tests.unit.test_scheduler_engine import CARD, make_engine, request


async def test_a_queued_request_is_said_admitted_before_its_first_token():
    engine, link = await make_engine(max_num_seqs=1)
    link.auto = False                       # the step never comes back: no token for anyone
    server, addr = await start_fake_server(ServingServicer(engine, CARD, "/nonexistent"))
    try:
        async with grpc.aio.insecure_channel(addr, options=LOCAL_SUBCHANNELS) as channel:
            stub = pb_grpc.ServingStub(channel)
            running = GenerateStream(stub.Generate(request("running", max_tokens=50)))
            queued = GenerateStream(stub.Generate(request("queued", max_tokens=50)))
            assert await asyncio.wait_for(running.admitted(), 2)
            assert await asyncio.wait_for(queued.admitted(), 2)
            load = engine.load()
            assert (load.num_running, load.num_waiting) == (1, 1)     # no token was sent to either
            metadata = await queued._call.initial_metadata()
            assert (ADMITTED_METADATA_KEY, "1") in list(metadata)
            queued.cancel()
            running.cancel()
    finally:
        await server.stop(None)
        await engine.stop()


async def test_a_refused_request_is_not_said_admitted():
    engine, _ = await make_engine(max_num_seqs=1)
    server, addr = await start_fake_server(ServingServicer(engine, CARD, "/nonexistent"))
    try:
        async with grpc.aio.insecure_channel(addr, options=LOCAL_SUBCHANNELS) as channel:
            stub = pb_grpc.ServingStub(channel)
            too_long = GenerateStream(stub.Generate(request("long", num_prompt=CARD["max_context_len"])))
            assert await asyncio.wait_for(too_long.admitted(), 2) is False
            with pytest.raises(Exception, match="context"):
                await too_long.next()
    finally:
        await server.stop(None)
        await engine.stop()
