"""Unit tests: the scheduler serves vLLM's vllm:cache_config_info (an info gauge at 1 whose labels are the KV cache's
configuration, vllm/v1/metrics/loggers.py log_metrics_info): the Gateway API Inference Extension's endpoint picker
reads block_size and num_gpu_blocks from it to size its prefix-cache scorer (kubernetes-sigs/
gateway-api-inference-extension#1512; SGLang added the same series for it, sgl-project/sglang#17273), and found none
here."""
from tests.unit.test_scheduler_engine import hello, make_engine


def info(engine) -> list:
    """The info gauge's samples, as (labels, value)."""
    return [(sample.labels, sample.value) for family in engine.metrics.cache_config_info.collect()
            for sample in family.samples]


async def test_the_workers_kv_pool_is_in_cache_config_info():
    engine, _ = await make_engine()
    assert info(engine) == [({"block_size": "16", "num_gpu_blocks": "64", "enable_prefix_caching": "True"}, 1.0)]
    await engine.stop()


async def test_a_new_worker_replaces_the_labels():
    engine, link = await make_engine(prefix_cache=0)
    link.auto = False
    bigger = hello("w2", nonce=99).hello
    bigger.num_blocks, bigger.block_size = 512, 32
    engine.handle_hello(bigger)
    assert engine.worker_id == "w1"      # a standby while w1 serves
    engine.worker_lost("worker w1 stopped answering")
    engine.handle_hello(bigger)
    assert engine.worker_id == "w2"
    assert info(engine) == [({"block_size": "32", "num_gpu_blocks": "512", "enable_prefix_caching": "False"}, 1.0)]
    await engine.stop()
