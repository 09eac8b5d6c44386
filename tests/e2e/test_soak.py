"""End to end, a short soak (bench/soak.py's driver): seeded random requests over every generation API from 32 clients
on a stack with a small KV pool (48 blocks: one long prompt takes most of it), 24 state slots, chunked prompts and 3
prefix-cache entries (evicted), some cut by their clients mid-prefill, mid-stream or by a timeout, some malformed.
Every answer its client read whole is well formed in its API's shape (bench/soak_shapes.py), and once the stack is
idle it holds nothing: the scheduler's gauges and the gateway's in-flight gauge at 0, every KV block and state slot
free after the prefix cache is dropped, no TCP connection open to the gateway (bench/soak_checks.py)."""
import asyncio

import pytest

from bench import soak_checks
from bench.soak import drive
from bench.soak_cases import CaseMaker
from tests.e2e.stack import EngineStack, running_gateway

MAX_MODEL_LEN = 768
SOAK_ENV = {"SPARKINFER_MAX_NUM_BATCHED_TOKENS": "128", "SPARKINFER_PREFIX_CACHE_MIN_TOKENS": "32",
            "SPARKINFER_PREFIX_CACHE_ENTRIES": "3", "SPARKINFER_NUM_STATE_SLOTS": "24",
            "SPARKINFER_MAX_MODEL_LEN": str(MAX_MODEL_LEN)}


@pytest.fixture(scope="module")
def soak_stack():
    with EngineStack(env=SOAK_ENV, worker_env={"SPARKINFER_NUM_KV_BLOCKS": "48"}) as stack:
        with running_gateway(stack) as url:
            yield stack, url


def test_a_short_soak_answers_well_and_leaves_nothing_held(soak_stack):
    stack, url = soak_stack
    maker = CaseMaker(seed=7, max_model_len=MAX_MODEL_LEN)
    results = asyncio.run(drive(url, [maker.make() for _ in range(160)], concurrency=32, seed=7))
    malformed = [(r.case.api, r.case.stream, r.problems) for r in results if r.problems]
    assert not malformed
    assert sum(r.cut for r in results) > 10 and sum(not r.cut and r.status == 200 for r in results) > 80
    port = int(url.rsplit(":", 1)[1])
    assert soak_checks.idle_leaks(f"http://127.0.0.1:{stack.metrics_port}/metrics", url, stack.grpc_addr, port) == []
