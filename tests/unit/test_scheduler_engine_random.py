"""Unit tests: the scheduler's engine (scheduler/engine.py: its step loop with lookahead steps, streams, cancel and
finish) under seeded random load against an in-memory worker that gives every request a known answer
(tests/unit/sched_oracle.py PositionWorker): each stream ends exactly once, with its request's tokens and finish
reason, or is cut short by its client (Engine.cancel: nothing more is put on it) or the gateway (Engine.finish: one
final 'stop'), and the pools are whole once the engine is idle."""
import asyncio
import random

import pytest

from proto import pb
from scheduler.admission import ContextLengthError
from tests.unit.sched_oracle import STOP_IDS, PositionWorker, Spec
from tests.unit.test_scheduler_engine import make_engine


async def _read(queue, got: list, finals: list, num_items: list) -> None:
    """Reads a stream to its end: tokens into `got`, each final item (a finish_reason or an error) into `finals`,
    the items read counted in num_items[0]."""
    while True:
        item = await queue.get()
        num_items[0] += 1
        if isinstance(item, Exception):
            finals.append(("error", -1))
            return
        got.extend(item.token_ids)
        if item.finish_reason:
            finals.append((item.finish_reason, item.stop_token_id))
            return


async def _load(engine, rng: random.Random, specs: dict, readers: dict, cut: dict) -> None:
    """Submits 60 requests (refused past the context), cancels or finishes a random one now and then; `readers`
    gets req_id -> (reader task, tokens, finals, [items read]), `cut` req_id -> ("abort", items it may read) or
    ("stop",)."""
    queues = {}
    for i in range(60):
        prompt = [rng.randrange(10, 900) for _ in range(rng.randrange(1, 200))]
        max_tokens = rng.randrange(0, 60)
        spec = Spec(f"q{i}", i + 1, prompt, max_tokens, frozenset(rng.sample(STOP_IDS, 3)), 0, rng.choice([0, 30]))
        specs[spec.req_id] = spec
        request = pb.GenerateRequest(req_id=spec.req_id, prompt_token_ids=prompt, max_tokens=max_tokens,
                                     stop_token_ids=sorted(spec.stops), ignore_eos=True)
        try:
            queues[spec.req_id] = engine.submit(request)
        except ContextLengthError:
            assert len(prompt) + max_tokens > engine.scheduler.max_context_len
            del specs[spec.req_id]
            continue
        got, finals, num_items = [], [], [0]
        task = asyncio.create_task(_read(queues[spec.req_id], got, finals, num_items))
        readers[spec.req_id] = (task, got, finals, num_items)
        for _ in range(rng.randrange(4)):
            await asyncio.sleep(0)
        if rng.random() < 0.15:
            victim = rng.choice(sorted(readers))
            if rng.random() < 0.5:
                engine.cancel(victim)
                # the items its client had read or could still read then: nothing more may come (stream dropped)
                cut.setdefault(victim, ("abort", readers[victim][3][0] + queues[victim].qsize()))
            elif engine.finish(victim, "stop"):
                cut.setdefault(victim, ("stop",))


@pytest.mark.parametrize("seed", range(4))
async def test_random_load_ends_each_stream_once_with_its_answer(seed):
    rng = random.Random(seed)
    engine, link = await make_engine(max_num_batched_tokens=rng.choice([16, 48, 256]), max_num_seqs=8,
                                     async_scheduling=seed % 2)
    specs, readers, cut = {}, {}, {}
    link.worker = PositionWorker(specs, 4, 16, 64, engine.scheduler.max_context_len)
    await _load(engine, rng, specs, readers, cut)
    waited = [task for req_id, (task, *_) in readers.items() if cut.get(req_id, ("",))[0] != "abort"]
    await asyncio.wait_for(asyncio.gather(*waited), 20)
    await asyncio.sleep(0.05)
    for req_id, (task, got, finals, num_items) in readers.items():
        want, reason, stop_id = specs[req_id].expected(engine.scheduler.max_context_len)
        assert got == want[:len(got)], req_id
        kind = cut.get(req_id, ("",))
        if kind[0] == "":
            assert (got, finals) == (want, [(reason, stop_id)]), req_id
        elif kind[0] == "stop":
            assert len(finals) == 1 and finals[0][0] in ("stop", reason), (req_id, finals)
        else:
            assert len(finals) <= 1 and num_items[0] <= kind[1], (req_id, finals, num_items, kind)
            task.cancel()
    sched = engine.scheduler
    assert not sched.has_work() and not engine.streams
    sched.self_check()
    sched.prefix_cache.clear()
    assert sched.block_manager.num_free_blocks == 64 and sched.state_pool.num_free_slots == 4
    await engine.stop()
