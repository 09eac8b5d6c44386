"""vLLM's vllm:num_requests_waiting_by_reason{reason} and vllm:engine_sleep_state{sleep_state} (vllm/v1/metrics/
loggers.py), served by the scheduler and mirrored on the gateway's /metrics as its other load gauges are. vLLM's
Grafana boards (examples/observability/dashboards/grafana) read them: the service status board's Status panel is
`(2 - (max(vllm:engine_sleep_state{sleep_state="awake"}) == bool 0)) or vector(0)`, "Down" (0) when no awake series
answers, which it showed for a serving SparkInfer; the KV-cache board's "Waiting for capacity" and "Scheduler queue"
panels sum num_requests_waiting_by_reason{reason="capacity"} and {reason="deferred"} and found nothing."""
import asyncio

from prometheus_client.parser import text_string_to_metric_families

from proto import pb
from tests.unit.test_scheduler_engine import make_engine, request


def labelled(samples, name: str, label: str) -> dict:
    """{label value: sample value} of the series `name`, from (name, labels, value) samples."""
    return {labels[label]: value for sample, labels, value in samples if sample == name}


def engine_samples(engine) -> list:
    metrics = engine.metrics
    return [(sample.name, sample.labels, sample.value)
            for gauge in (metrics.num_requests_waiting_by_reason, metrics.engine_sleep_state)
            for family in gauge.collect() for sample in family.samples]


async def test_the_scheduler_counts_its_queue_as_waiting_for_capacity_and_is_awake():
    engine, link = await make_engine(max_num_seqs=1)
    link.auto = False
    samples = engine_samples(engine)
    assert labelled(samples, "sparkinfer_num_requests_waiting_by_reason", "reason") == {"capacity": 0, "deferred": 0}
    assert labelled(samples, "sparkinfer_engine_sleep_state", "sleep_state") == {
        "awake": 1, "weights_offloaded": 0, "discard_all": 0}
    for num in range(3):
        engine.submit(request(f"r{num}"))
    waiting = labelled(engine_samples(engine), "sparkinfer_num_requests_waiting_by_reason", "reason")
    assert waiting == {"capacity": 3, "deferred": 0}
    await answer_first_step(link)
    # One seat: of the three requests one ran its first step and two wait for the seat.
    waiting = labelled(engine_samples(engine), "sparkinfer_num_requests_waiting_by_reason", "reason")
    assert waiting == {"capacity": 2, "deferred": 0}
    await engine.stop()


async def answer_first_step(link) -> None:
    """Answers the step the engine sent (the link's worker off), and lets the engine apply the result."""
    while not [msg for msg in link.sent if msg.WhichOneof("kind") == "step"]:
        await asyncio.sleep(0.005)
    step = next(msg.step for msg in link.sent if msg.WhichOneof("kind") == "step")
    result = link.worker.run(step)
    result.session_id = step.session_id
    link.inbox.put_nowait(pb.WorkerMessage(result=result))
    await asyncio.sleep(0.05)


async def test_the_gateway_mirrors_them_from_the_schedulers_load(stack):
    client, fake = stack
    fake.load_fields = {"num_waiting": 3}
    text = (await (await client.get("/metrics")).read()).decode()
    samples = [(sample.name, sample.labels, sample.value)
               for family in text_string_to_metric_families(text) for sample in family.samples]
    assert labelled(samples, "sparkinfer_num_requests_waiting_by_reason", "reason") == {"capacity": 3, "deferred": 0}
    assert labelled(samples, "sparkinfer_engine_sleep_state", "sleep_state") == {
        "awake": 1, "weights_offloaded": 0, "discard_all": 0}
