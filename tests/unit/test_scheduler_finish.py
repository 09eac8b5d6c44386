"""Unit tests: Finish (the gateway ends a request itself, e.g. a stop string) frees it and counts its own reason."""
import asyncio

import grpc
import pytest

from gateway.fake_scheduler import LOCAL_SUBCHANNELS, start_fake_server
from proto import pb, pb_grpc
from scheduler.admission import InvalidRequestError
from scheduler.server import ServingServicer
from tests.unit.test_scheduler import make_request, make_scheduler
from tests.unit.test_scheduler_engine import CARD, drain, make_engine, request


def success(engine, reason: str) -> float:
    return engine.metrics.request_success.labels(finished_reason=reason)._value.get()


def test_scheduler_abort_with_a_reason_frees_slot_and_blocks():
    sched = make_scheduler()
    req = make_request("s", 40, max_tokens=8)
    sched.add_request(req)
    assert sched.schedule() is not None and req.block_ids and req.state_slot >= 0
    assert sched.abort("s", "stop") is req
    assert req.finish_reason == "stop" and not sched.has_work()
    assert sched.block_manager.num_free_blocks == sched.block_manager.num_total_blocks
    assert sched.state_pool.num_free_slots == sched.state_pool.num_total_slots
    sched.add_request(make_request("next", 4))
    assert list(sched.schedule().finished_req_ids) == ["s"]   # the worker drops its sampling state


async def test_finish_frees_everything_and_counts_the_reason():
    engine, link = await make_engine()
    link.auto = False                      # the request stays mid-flight: a step is out, no result yet
    queue = engine.submit(request("r", max_tokens=50))
    while engine.load().num_running == 0:
        await asyncio.sleep(0.001)
    assert engine.load().num_free_slots == 3
    assert engine.finish("r", "stop") is True
    load = engine.load()
    assert load.num_running == load.num_waiting == 0
    assert load.num_free_slots == 4 and load.num_free_blocks == 64
    tokens, last = await drain(queue)      # the stream ends with the gateway's reason
    assert tokens == [] and last.finish_reason == "stop" and last.stop_token_id == -1
    assert success(engine, "stop") == 1 and success(engine, "abort") == 0
    assert engine.finish("r", "stop") is False          # already ended: counted once
    engine.cancel("r")                                  # the gateway's cancel that follows is a no-op
    assert success(engine, "stop") == 1 and success(engine, "abort") == 0
    await engine.stop()


async def test_cancel_still_counts_abort_and_bad_reasons_are_refused():
    engine, link = await make_engine()
    link.auto = False
    engine.submit(request("gone"))
    with pytest.raises(InvalidRequestError, match="finish_reason"):
        engine.finish("gone", "abort")
    engine.cancel("gone")
    assert success(engine, "abort") == 1 and success(engine, "stop") == 0
    assert engine.finish("unknown", "stop") is False
    await engine.stop()


async def test_finish_rpc_over_grpc_ends_the_generate_stream():
    engine, _ = await make_engine()
    engine.link.auto = False
    server, addr = await start_fake_server(ServingServicer(engine, CARD, "/nonexistent"))
    async with grpc.aio.insecure_channel(addr, options=LOCAL_SUBCHANNELS) as channel:
        stub = pb_grpc.ServingStub(channel)
        call = stub.Generate(request("g", max_tokens=50))
        while "g" not in engine.streams:
            await asyncio.sleep(0.001)
        reply = await stub.Finish(pb.FinishRequest(req_id="g", finish_reason="stop"))
        last = await asyncio.wait_for(call.read(), 2)
        assert reply.finished and last.finish_reason == "stop"
        assert await call.read() is grpc.aio.EOF
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await stub.Finish(pb.FinishRequest(req_id="g", finish_reason="weird"))
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert success(engine, "stop") == 1 and success(engine, "abort") == 0
    await server.stop(None)
    await engine.stop()
