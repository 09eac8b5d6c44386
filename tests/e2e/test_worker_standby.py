"""End-to-end: two worker processes connected to one scheduler (a compose file's `replicas: 2` on the worker, a rolling
update starting the new worker before the old one stops, a second worker started by mistake). The first one registered
serves every step; the second is a standby that both processes log once, and it takes over (its own KV pool) once the
first is killed.

Before, the scheduler's PUSH socket dealt steps and pings round-robin over both workers: each ran half the steps and
each one's hellos replaced the other ("worker ... was replaced by worker ..."), so every request failed."""
import asyncio
import os
import re
import signal
import time

import grpc

from proto import pb, pb_grpc
from tests.e2e.stack import kill


def _request(req_id: str, i: int, max_tokens: int = 6):
    prompt_ids = [(37 * i + 11 * j + 5) % 1000 + 3 for j in range(12)]
    return pb.GenerateRequest(req_id=req_id, prompt_token_ids=prompt_ids, max_tokens=max_tokens, ignore_eos=True)


async def _collect(stub, request) -> tuple:
    tokens, last = [], None
    async for resp in stub.Generate(request):
        tokens.extend(resp.token_ids)
        last = resp
    return tokens, last


async def _serve_all(stub, tag: str) -> None:
    results = await asyncio.gather(*(_collect(stub, _request(f"{tag}{i}", i)) for i in range(4)))
    assert all(len(tokens) == 6 and last.finish_reason == "length" for tokens, last in results), results


def _log(stack, name: str) -> str:
    with open(os.path.join(stack.log_dir, f"{name}.log"), errors="replace") as f:
        return f.read()


async def _until(predicate, timeout: float, stack) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, f"timed out\n{stack.logs()}"
        await asyncio.sleep(0.1)


def _worker_id(stack, name: str) -> str:
    return re.search(r"worker ready: (\w+)", _log(stack, name)).group(1)


async def test_a_second_worker_is_a_standby_and_takes_over_when_the_first_dies(make_engine_stack):
    stack = make_engine_stack(worker_env={"SPARKINFER_NUM_KV_BLOCKS": "40"})
    first = stack.worker
    try:
        stack.worker_env = {"SPARKINFER_NUM_KV_BLOCKS": "24"}
        stack.start_worker()
        async with grpc.aio.insecure_channel(stack.grpc_addr) as channel:
            stub = pb_grpc.ServingStub(channel)

            async def standby_logged() -> bool:
                return "is a standby" in _log(stack, "worker2")
            await _until(standby_logged, 60, stack)
            await _serve_all(stub, "a")
            load = await stub.Load(pb.LoadRequest())
            assert load.worker_alive and load.num_total_blocks == 40      # the first worker's pool
            kill(first, signal.SIGKILL)

            async def second_serves() -> bool:
                load = await stub.Load(pb.LoadRequest())
                return load.worker_alive and load.num_total_blocks == 24
            await _until(second_serves, 10, stack)
            await _serve_all(stub, "b")
    finally:
        kill(first, signal.SIGKILL)
    one, two = _worker_id(stack, "worker1"), _worker_id(stack, "worker2")
    scheduler = _log(stack, "scheduler")
    assert scheduler.count("is a standby") == 1
    assert f"worker {two} is a standby: worker {one} serves this scheduler" in scheduler
    assert "replaced" not in scheduler and f"worker {one} disconnected" in scheduler
    second = _log(stack, "worker2")
    assert second.count("is a standby") == 1 and f"worker {two}: is a standby: worker {one} serves" in second
    assert f"worker {two}: serves the scheduler now" in second
