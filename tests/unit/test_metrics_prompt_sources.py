"""Unit tests: the scheduler's prompt tokens split by where their KV came from, as vLLM's documented series split them
(vllm/v1/metrics/loggers.py: vllm:prompt_tokens_by_source{source}, vllm:prompt_tokens_cached and the per-request
vllm:request_prefill_kv_computed_tokens). None was served, so an operator saw prompt_tokens_total count a prefix-cache
hit as prefill work, with no series saying how much of it the cache served."""
from prometheus_client import generate_latest

from tests.unit.test_prefix_cache import chat
from tests.unit.test_prefix_cache_engine import counter, generate, make_engine
from tests.unit.test_scheduler_engine import drain


def by_source(registry, source: str) -> float:
    return registry.get_sample_value("sparkinfer_prompt_tokens_by_source_total", {"source": source}) or 0.0


async def test_a_prefix_cache_hit_is_counted_as_cached_not_computed():
    engine, registry = await make_engine(prefix_cache_min_tokens=32)
    prompt = chat(4, 70)                                   # checkpoints at 64 and 80
    await drain(engine.submit(generate("a", prompt)))
    assert (by_source(registry, "local_compute"), by_source(registry, "local_cache_hit")) == (len(prompt), 0)
    await drain(engine.submit(generate("b", prompt + [5])))
    # The second prompt: 80 tokens from the cache, the rest prefilled.
    assert by_source(registry, "local_cache_hit") == 80
    assert by_source(registry, "local_compute") == len(prompt) + len(prompt) + 1 - 80
    assert by_source(registry, "external_kv_transfer") == 0
    assert counter(registry, "sparkinfer_prompt_tokens_cached_total") == 80
    # The split adds up to prompt_tokens_total, as vLLM's sources add up to its total.
    assert sum(by_source(registry, s) for s in ("local_compute", "local_cache_hit", "external_kv_transfer")) == \
        counter(registry, "sparkinfer_prompt_tokens_total")
    name = "sparkinfer_request_prefill_kv_computed_tokens"
    assert counter(registry, f"{name}_count") == 2
    assert counter(registry, f"{name}_sum") == len(prompt) + len(prompt) + 1 - 80
    await engine.stop()


async def test_each_source_is_there_at_0_from_the_start():
    engine, registry = await make_engine()
    text = generate_latest(registry).decode()
    for source in ("local_compute", "local_cache_hit", "external_kv_transfer"):
        assert f'sparkinfer_prompt_tokens_by_source_total{{source="{source}"}} 0.0' in text
    assert "sparkinfer_prompt_tokens_cached_total 0.0" in text
    assert 'sparkinfer_request_prefill_kv_computed_tokens_bucket{le="2000.0"} 0.0' in text
    await engine.stop()
