"""End to end: real scheduler + worker processes on loopback with the tiny model, driven over gRPC."""
import asyncio
import signal
import time
import urllib.request

import grpc
import pytest
import torch
from grpc_health.v1 import health_pb2

from proto import pb, pb_grpc
from tests.e2e.stack import DEFAULT_MODEL, kill
from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.loader import load_model

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


def prompt(i: int, length: int) -> list:
    return [(37 * i + 11 * j + 5) % 1000 + 3 for j in range(length)]


def greedy_request(req_id: str, prompt_ids: list, max_tokens: int, **kw):
    return pb.GenerateRequest(req_id=req_id, prompt_token_ids=prompt_ids, max_tokens=max_tokens, ignore_eos=True,
                              **kw)


async def collect(stub, request) -> tuple:
    tokens, last = [], None
    async for resp in stub.Generate(request):
        tokens.extend(resp.token_ids)
        last = resp
    return tokens, last


@pytest.fixture(scope="module")
def tiny_model():
    model, config = load_model(DEFAULT_MODEL, progress=False)
    return model, config


def solo_greedy(tiny_model, prompt_ids: list, num_tokens: int) -> list:
    """The model run on this prompt alone, one sequence, no scheduler: the reference for batching."""
    model, config = tiny_model
    cache = ModelCache(config, num_blocks=64, block_size=16, num_slots=1, device="cpu", dtype=torch.float32)
    blocks = list(range(64))
    tokens, context = list(prompt_ids), 0
    out = []
    for _ in range(num_tokens):
        feed = tokens[context:]
        batch = ForwardBatch.from_rows([(feed, context, 0, blocks, True)], 16)
        logits = model.forward(batch, cache)
        context = len(tokens)
        out.append(int(logits[0, :config.vocab_size].argmax()))
        tokens.append(out[-1])
    return out


async def test_info_and_health(engine_stack):
    assert engine_stack.health() == SERVING
    async with grpc.aio.insecure_channel(engine_stack.grpc_addr) as channel:
        info = await pb_grpc.ServingStub(channel).Info(pb.InfoRequest())
    assert info.model_id == "tiny" and info.max_context_len > 0 and info.vocab_size > 0
    assert info.tokenizer_json.startswith(b"{") and info.eos_token_ids


async def test_concurrent_greedy_requests_match_solo_runs(engine_stack, tiny_model):
    prompts = [prompt(i, 5 + 9 * i) for i in range(16)]
    async with grpc.aio.insecure_channel(engine_stack.grpc_addr) as channel:
        stub = pb_grpc.ServingStub(channel)
        results = await asyncio.gather(*(collect(stub, greedy_request(f"c{i}", p, 12))
                                         for i, p in enumerate(prompts)))
        load = await stub.Load(pb.LoadRequest())
    for i, (tokens, last) in enumerate(results):
        assert last.finish_reason == "length"
        assert tokens == solo_greedy(tiny_model, prompts[i], 12), f"request c{i} differs from its solo run"
    assert load.num_running == 0 and load.num_free_slots == load.num_total_slots
    assert load.num_free_blocks == load.num_total_blocks
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{engine_stack.metrics_port}/metrics", timeout=5).read().decode()
    for name in ("sparkinfer_num_requests_running", "sparkinfer_num_requests_waiting", "sparkinfer_kv_cache_usage_perc",
                 "sparkinfer_time_to_first_token_seconds_bucket", "sparkinfer_inter_token_latency_seconds_bucket",
                 "sparkinfer_e2e_request_latency_seconds_bucket", "sparkinfer_request_queue_time_seconds_bucket",
                 "sparkinfer_num_preemptions_total",
                 'sparkinfer_request_success_total{engine="0",finished_reason="length",model_name="tiny"}'):
        assert name in metrics, name
    generated = next(line for line in metrics.splitlines() if line.startswith("sparkinfer_generation_tokens_total"))
    assert float(generated.split()[-1]) >= 16 * 12


async def test_seeded_sampling_same_alone_and_in_a_crowd(engine_stack):
    sampling = pb.SamplingParams(temperature=1.0, top_p=0.9, has_seed=True, seed=77)
    async with grpc.aio.insecure_channel(engine_stack.grpc_addr) as channel:
        stub = pb_grpc.ServingStub(channel)
        alone, _ = await collect(stub, greedy_request("s-alone", prompt(3, 20), 10, sampling=sampling))
        crowd = [collect(stub, greedy_request(f"n{i}", prompt(i, 30), 10,
                                              sampling=pb.SamplingParams(temperature=0.8))) for i in range(5)]
        results = await asyncio.gather(collect(stub, greedy_request("s-crowd", prompt(3, 20), 10, sampling=sampling)),
                                       *crowd)
    assert results[0][0] == alone


async def test_cancelled_call_frees_its_slot(engine_stack):
    async with grpc.aio.insecure_channel(engine_stack.grpc_addr) as channel:
        stub = pb_grpc.ServingStub(channel)
        call = stub.Generate(greedy_request("cancel-me", prompt(1, 40), 0))
        first = await call.read()
        assert first.num_prompt_tokens == 40
        running = await stub.Load(pb.LoadRequest())
        assert running.num_running == 1 and running.num_free_slots == running.num_total_slots - 1
        call.cancel()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            load = await stub.Load(pb.LoadRequest())
            if load.num_running == 0 and load.num_free_slots == load.num_total_slots:
                break
            await asyncio.sleep(0.02)
        assert load.num_running == 0 and load.num_free_slots == load.num_total_slots
        assert load.num_free_blocks == load.num_total_blocks


async def test_prompt_longer_than_context_is_invalid(engine_stack):
    async with grpc.aio.insecure_channel(engine_stack.grpc_addr) as channel:
        stub = pb_grpc.ServingStub(channel)
        info = await stub.Info(pb.InfoRequest())
        too_long = [5] * (info.max_context_len + 3)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await collect(stub, greedy_request("long", too_long, 1))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert str(len(too_long)) in err.value.details() and str(info.max_context_len) in err.value.details()


async def test_queue_depth_limit_rejects_at_once(make_engine_stack):
    stack = make_engine_stack(env={"SPARKINFER_MAX_QUEUE_DEPTH": "1", "SPARKINFER_MAX_NUM_SEQS": "1"})
    async with grpc.aio.insecure_channel(stack.grpc_addr) as channel:
        stub = pb_grpc.ServingStub(channel)
        running = stub.Generate(greedy_request("run", prompt(1, 10), 0))
        await running.read()
        waiting = stub.Generate(greedy_request("wait", prompt(2, 10), 0, group_id="wait"))
        while (await stub.Load(pb.LoadRequest())).num_waiting < 1:
            await asyncio.sleep(0.01)
        start = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await collect(stub, greedy_request("reject", prompt(3, 10), 4))
        assert time.monotonic() - start < 1.0  # no step, no worker work: only the admission check
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # Another choice of the waiting request's API request (same group) is admitted past the depth.
        sibling = stub.Generate(greedy_request("wait-sibling", prompt(2, 10), 0, group_id="wait"))
        for _ in range(300):
            if (await stub.Load(pb.LoadRequest())).num_waiting == 2:
                break
            await asyncio.sleep(0.01)
        assert (await stub.Load(pb.LoadRequest())).num_waiting == 2
        for call in (running, waiting, sibling):
            call.cancel()


async def test_worker_death_fails_requests_and_recovers(make_engine_stack):
    stack = make_engine_stack()
    async with grpc.aio.insecure_channel(stack.grpc_addr) as channel:
        stub = pb_grpc.ServingStub(channel)
        calls = [stub.Generate(greedy_request(f"k{i}", prompt(i, 20), 0)) for i in range(3)]
        for call in calls:
            await call.read()
        stack.kill_worker()
        killed = time.monotonic()
        codes = []
        for call in calls:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                while True:
                    resp = await call.read()
                    assert resp is not grpc.aio.EOF
            codes.append(err.value.code())
        failed_after = time.monotonic() - killed
        assert codes == [grpc.StatusCode.UNAVAILABLE] * 3
        assert failed_after < 1.5, f"requests failed {failed_after:.2f} s after the worker died"
        assert stack.health() == NOT_SERVING
        assert not (await stub.Load(pb.LoadRequest())).worker_alive
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await collect(stub, greedy_request("no-worker", prompt(1, 5), 2))
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        stack.start_worker()
        stack.wait_serving()
        tokens, last = await collect(stub, greedy_request("after", prompt(1, 5), 3))
        assert len(tokens) == 3 and last.finish_reason == "length"


async def test_preemption_keeps_greedy_and_seeded_tokens(make_engine_stack, tiny_model):
    # 12 KV blocks (192 tokens) for 4 requests that each grow to 70 tokens: preemption must happen.
    stack = make_engine_stack(worker_env={"SPARKINFER_NUM_KV_BLOCKS": "12"})
    prompts = [prompt(40 + i, 30) for i in range(4)]
    seeded = pb.SamplingParams(temperature=1.0, has_seed=True, seed=5, presence_penalty=0.5)
    async with grpc.aio.insecure_channel(stack.grpc_addr) as channel:
        stub = pb_grpc.ServingStub(channel)
        seeded_alone, _ = await collect(stub, greedy_request("seeded-alone", prompts[0], 40, sampling=seeded))
        results = await asyncio.gather(
            collect(stub, greedy_request("seeded", prompts[0], 40, sampling=seeded)),
            *(collect(stub, greedy_request(f"g{i}", p, 40)) for i, p in enumerate(prompts[1:], 1)))
        load = await stub.Load(pb.LoadRequest())
    assert load.num_preemptions > 0
    assert results[0][0] == seeded_alone
    for i, (tokens, _) in enumerate(results[1:], 1):
        assert tokens == solo_greedy(tiny_model, prompts[i], 40), f"request g{i} changed by preemption"
    assert load.num_free_blocks == load.num_total_blocks == 12


async def test_start_order_and_scheduler_restart(make_engine_stack):
    stack = make_engine_stack(start=False)
    stack.start_worker()
    stack.start_scheduler()
    stack.wait_serving()
    async with grpc.aio.insecure_channel(stack.grpc_addr) as channel:
        first, _ = await collect(pb_grpc.ServingStub(channel), greedy_request("one", prompt(1, 8), 4))
    kill(stack.scheduler, signal.SIGKILL)
    stack.start_scheduler()
    stack.wait_serving()
    async with grpc.aio.insecure_channel(stack.grpc_addr) as channel:
        again, _ = await collect(pb_grpc.ServingStub(channel), greedy_request("one", prompt(1, 8), 4))
    assert again == first and len(first) == 4


async def collect_with_logprobs(stub, request) -> tuple:
    """(token ids, logprobs, num_cached_tokens of the first message) of one Generate call."""
    tokens, logprobs, cached = [], [], None
    async for resp in stub.Generate(request):
        tokens.extend(resp.token_ids)
        logprobs.extend(resp.logprobs)
        cached = resp.num_cached_tokens if cached is None else cached
    return tokens, logprobs, cached


async def test_prefix_cache_hits_give_the_cold_bits(make_engine_stack):
    im_start, im_end = 1016, 1017
    stack = make_engine_stack(env={"SPARKINFER_PREFIX_CACHE_MIN_TOKENS": "32"})
    turn1 = [im_start] + prompt(5, 120) + [im_start] + prompt(6, 20) + [im_start, 7, 8]   # anchors at 121, 142
    seeded = pb.SamplingParams(temperature=1.0, has_seed=True, seed=9)
    async with grpc.aio.insecure_channel(stack.grpc_addr) as channel:
        stub = pb_grpc.ServingStub(channel)
        cold = await collect_with_logprobs(stub, greedy_request("cold", turn1, 10, sampling=seeded))
        warm = await collect_with_logprobs(stub, greedy_request("warm", turn1, 10, sampling=seeded))
        turn2 = turn1 + cold[0] + [im_end, im_start] + prompt(7, 30) + [im_start, 7, 8]
        second = await collect_with_logprobs(stub, greedy_request("turn2", turn2, 10))
        load = await stub.Load(pb.LoadRequest())
    assert cold[2] == 0 and warm[2] == 128 and second[2] == 128
    assert warm[:2] == cold[:2] and len(second[0]) == 10
    assert load.num_prefix_entries >= 2 and load.num_running == 0
    assert load.num_free_blocks + load.num_cached_blocks == load.num_total_blocks
    assert load.num_free_slots + load.num_prefix_entries == load.num_total_slots
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{stack.metrics_port}/metrics", timeout=5).read().decode()
    values = {line.split()[0]: float(line.split()[1]) for line in metrics.splitlines() if line.startswith("sparkinfer_")}
    labels = '{engine="0",model_name="tiny"}'
    assert values[f"sparkinfer_prefix_cache_queries_total{labels}"] == 2 * len(turn1) + len(turn2)
    assert values[f"sparkinfer_prefix_cache_hits_total{labels}"] == 256
