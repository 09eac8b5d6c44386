"""Unit tests: the gateway's channel pings the scheduler, so a scheduler that stops answering without closing its
connection (stopped with SIGSTOP here; a stuck loop or a host cut off alike) fails the calls on it with 503 instead
of leaving them waiting forever; and the scheduler's server takes those pings on a stream silent for long (a queued
request), where gRPC's defaults answer GOAWAY too_many_pings."""
import asyncio
import os
import signal
import subprocess
import sys

import pytest

from gateway.client import SchedulerClient
from gateway.errors import Unavailable
from proto import pb

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A fake scheduler in its own process, served with the scheduler's own server options; prints its port.
SERVER = """
import asyncio
import grpc
from gateway.fake_scheduler import FakeServing, build_tokenizer
from proto import pb_grpc
from scheduler.server import GRPC_OPTIONS

async def main():
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    fake.script.reply, fake.script.delay_s = "Hello world " * 100, 0.05
    fake.script.first_delay_s = {1: 3.0}       # choice 1 is silent for 3 s (queued) before its first token
    server = grpc.aio.server(options=GRPC_OPTIONS)
    pb_grpc.add_ServingServicer_to_server(fake, server)
    print(server.add_insecure_port("127.0.0.1:0"), flush=True)
    await server.start()
    await server.wait_for_termination()

asyncio.run(main())
"""


@pytest.fixture
async def scheduler():
    proc = subprocess.Popen([sys.executable, "-c", SERVER], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        port = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
        yield proc, f"127.0.0.1:{int(port)}"
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait(10)


def request(choice: int) -> "pb.GenerateRequest":
    return pb.GenerateRequest(req_id=f"r-{choice}", prompt_token_ids=[5, 6, 7], max_tokens=400)


async def test_a_scheduler_that_stops_answering_fails_the_call(scheduler):
    proc, addr = scheduler
    client = SchedulerClient(addr, keepalive_time_ms=300, keepalive_timeout_ms=300)
    try:
        stream = client.generate(request(0))
        assert (await asyncio.wait_for(stream.next(), 10)).token_ids
        os.kill(proc.pid, signal.SIGSTOP)
        # Before: the call waited forever (a chat request through the gateway: no answer after 20 s, curl gave up).
        with pytest.raises(Unavailable):
            await asyncio.wait_for(_drain(stream), 5)
    finally:
        await client.close()


async def test_a_silent_stream_is_not_cut_by_its_pings(scheduler):
    _, addr = scheduler
    client = SchedulerClient(addr, keepalive_time_ms=200, keepalive_timeout_ms=1000)
    try:
        stream = client.generate(request(1))     # 3 s without a byte: 15 pings
        first = await asyncio.wait_for(stream.next(), 10)
        assert first.token_ids and first.queue_time_ns == 3_000_000_000
        last = await asyncio.wait_for(_drain(stream), 30)
        assert last.finish_reason == "stop"
    finally:
        await client.close()


async def _drain(stream):
    last = None
    while (message := await stream.next()) is not None:
        last = message
    return last
