"""Unit tests: the prefix cache through the step engine (metrics, Load, cached tokens, config), no torch."""
import asyncio
import json

from prometheus_client import CollectorRegistry, generate_latest

from proto import pb
from scheduler.config import SchedulerConfig, parse_config
from scheduler.engine import Engine
from scheduler.metrics import Metrics
from scheduler.prefix_cache import anchor_token_id
from tests.unit.test_prefix_cache import ANCHOR, chat
from tests.unit.test_scheduler_engine import FakeLink, drain, hello

TOKENIZER = json.dumps({"added_tokens": [{"id": 899, "content": "<|endoftext|>"},
                                         {"id": ANCHOR, "content": "<|im_start|>"}]}).encode()
CARD = {"max_context_len": 4096, "eos_token_ids": [999], "vocab_size": 1000, "tokenizer_json": TOKENIZER}


async def make_engine(**config):
    config = SchedulerConfig(ping_interval_s=0.02, worker_timeout_s=0.2, **config)
    link = FakeLink()
    registry = CollectorRegistry()
    engine = Engine(config, CARD, link, Metrics(registry))
    engine.start()
    link.inbox.put_nowait(hello())
    await asyncio.wait_for(engine.alive_event.wait(), 1)
    return engine, registry


def generate(req_id: str, prompt: list) -> "pb.GenerateRequest":
    return pb.GenerateRequest(req_id=req_id, prompt_token_ids=prompt, max_tokens=4, ignore_eos=True)


def counter(registry, name: str) -> float:
    return registry.get_sample_value(name) or 0.0


def test_anchor_token_id_from_the_card():
    assert anchor_token_id(CARD) == ANCHOR
    assert anchor_token_id({"tokenizer_json": b'{"added_tokens": []}'}) == -1
    assert anchor_token_id({}) == -1 and anchor_token_id({"tokenizer_json": b"not json"}) == -1


def test_config_from_environment():
    env = {"SPARKINFER_PREFIX_CACHE": "0", "SPARKINFER_PREFIX_CACHE_ENTRIES": "4",
           "SPARKINFER_PREFIX_CACHE_MIN_TOKENS": "64"}
    config = parse_config([], environ=env)
    assert (config.prefix_cache, config.prefix_cache_entries, config.prefix_cache_min_tokens) == (0, 4, 64)
    assert parse_config([], environ={}).prefix_cache_min_tokens == 1024


async def test_metrics_load_and_cached_tokens_count_hits():
    engine, registry = await make_engine(prefix_cache_min_tokens=32)
    prompt = chat(1, 70)                                   # checkpoints at 64 and 80
    _, first = await drain(engine.submit(generate("a", prompt)))
    tokens, second = await drain(engine.submit(generate("b", prompt + [5])))
    assert len(tokens) == 4
    assert counter(registry, "sparkinfer_prefix_cache_queries_total") == 2 * len(prompt) + 1
    assert counter(registry, "sparkinfer_prefix_cache_hits_total") == 80
    # As vLLM: counters and histograms come without their _created series.
    exposition = generate_latest(registry)
    assert b"sparkinfer_prefix_cache_hits_total 80.0" in exposition and b"_created" not in exposition
    load = engine.load()
    assert load.num_prefix_entries == 2 and load.num_cached_blocks == 5
    assert load.num_free_blocks + load.num_cached_blocks == load.num_total_blocks
    assert load.num_free_slots + load.num_prefix_entries == load.num_total_slots
    await engine.stop()


async def test_first_response_carries_the_cached_token_count():
    engine, _ = await make_engine(prefix_cache_min_tokens=32)
    prompt = chat(2, 70)
    await drain(engine.submit(generate("a", prompt)))
    queue = engine.submit(generate("b", prompt + [5]))
    first = await asyncio.wait_for(queue.get(), 2)
    assert first.num_cached_tokens == 80 and first.num_prompt_tokens == len(prompt) + 1
    await drain(queue)
    await engine.stop()


async def test_cache_off_counts_nothing():
    engine, registry = await make_engine(prefix_cache=0, prefix_cache_min_tokens=32)
    prompt = chat(3, 70)
    await drain(engine.submit(generate("a", prompt)))
    await drain(engine.submit(generate("b", prompt + [5])))
    assert counter(registry, "sparkinfer_prefix_cache_hits_total") == 0
    assert counter(registry, "sparkinfer_prefix_cache_queries_total") == 0
    assert engine.load().num_prefix_entries == 0 and engine.load().num_free_blocks == 64
    await engine.stop()


async def test_reset_prefix_cache_drops_the_entries_so_the_next_prompt_prefills_from_scratch():
    # vLLM's /reset_prefix_cache and SGLang's /flush_cache: benchmarks reset between runs to time cold prefills.
    engine, _ = await make_engine(prefix_cache_min_tokens=32)
    prompt = chat(4, 70)
    await drain(engine.submit(generate("a", prompt)))
    reply = engine.reset_prefix_cache()
    assert (reply.num_dropped, reply.num_entries) == (2, 0)
    load = engine.load()
    assert load.num_prefix_entries == 0 and load.num_free_blocks == load.num_total_blocks
    assert load.num_free_slots == load.num_total_slots
    queue = engine.submit(generate("b", prompt + [5]))
    assert (await asyncio.wait_for(queue.get(), 2)).num_cached_tokens == 0
    await drain(queue)
    assert engine.reset_prefix_cache().num_dropped == 2   # b's own checkpoints, cached again
    await engine.stop()
