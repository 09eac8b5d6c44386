"""Unit tests: the scheduler's server pings its gateways, so the requests of a gateway that stops answering without
closing its connection (stopped with SIGSTOP here; a stuck gateway or a host cut off alike) are cancelled and free
their seats, instead of running on, or waiting, for a client that will never read them."""
import asyncio
import os
import signal
import subprocess
import sys

import grpc
import pytest

from proto import pb_grpc
from proto.keepalive import server_options
from scheduler.server import ServingServicer
from tests.unit.test_scheduler_engine import CARD, make_engine

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A gateway-side client in its own process: opens a running and a queued Generate call, says so, then reads nothing.
CLIENT = """
import asyncio, sys
from gateway.client import SchedulerClient
from tests.unit.test_scheduler_engine import request

async def main():
    client = SchedulerClient(sys.argv[1])
    calls = [client.generate(request(name, max_tokens=50)) for name in ("running", "queued")]
    for call in calls:
        await call.admitted()
    print("admitted", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


@pytest.fixture
async def scheduler():
    engine, link = await make_engine(max_num_seqs=1)
    answer = link.send
    # Pings are answered (the worker is alive), steps never come back: the running request never ends by itself.
    link.send = lambda msg: msg.WhichOneof("kind") == "step" or answer(msg)
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)] + server_options(300, 300))
    pb_grpc.add_ServingServicer_to_server(ServingServicer(engine, CARD, "/nonexistent"), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield engine, f"127.0.0.1:{port}"
    await server.stop(None)
    await engine.stop()


async def test_the_requests_of_a_gateway_that_stops_answering_are_cancelled(scheduler):
    engine, addr = scheduler
    proc = subprocess.Popen([sys.executable, "-c", CLIENT, addr], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert (await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)).strip() == "admitted"
        load = engine.load()
        assert (load.num_running, load.num_waiting) == (1, 1)
        os.kill(proc.pid, signal.SIGSTOP)
        for _ in range(100):                # 5 s; before: both held their seat and place for as long as it stopped
            if not engine.streams:
                break
            await asyncio.sleep(0.05)
        load = engine.load()
        assert (load.num_running, load.num_waiting, len(engine.streams)) == (0, 0, 0)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait(10)
