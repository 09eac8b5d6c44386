"""Every series on the gateway's and the scheduler's /metrics (but llama-server's llamacpp:*) carries model_name, the served model's name, as vLLM
labels every series (vllm/v1/metrics/loggers.py: labelnames ["model_name", "engine"]); the Grafana dashboards built for
vLLM (its examples/online_serving/prometheus_grafana/grafana.json) filter every panel on model_name="$model_name", so
with the names alone (sparkinfer_ for vllm:) they showed nothing here."""
import socket
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from proto.metrics_label import ModelLabelled
from scheduler.config import parse_config
from scheduler.metrics import Metrics, serve_metrics

TOKENIZER = build_tokenizer()


def model_names(text: str) -> dict:
    """Series name -> the set of model_name values its samples carry (None for a sample without the label)."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, set()).add(sample.labels.get("model_name"))
    return found


@pytest.mark.parametrize("served, expected", [(None, "fake-model"), ("my-model", "my-model")],
                         ids=["checkpoint-id", "served-name"])
async def test_every_gateway_series_names_the_served_model(served, expected):
    async with fake_gateway(FakeServing(TOKENIZER), served_model_name=served) as (client, _):
        reply = await client.post("/v1/completions", json={"model": expected, "prompt": "hi", "max_tokens": 2})
        assert reply.status == 200
        text = (await (await client.get("/metrics")).read()).decode()
    names = model_names(text)
    assert names["sparkinfer_gateway_http_requests_total"] == {expected}
    assert names["sparkinfer_num_requests_running"] == {expected}
    # llama-server's own series (llamacpp:*) are written as llama-server writes them, without labels (its readers match
    # the bare line): tests/unit/test_metrics_llama_cpp_series.py.
    assert set().union(*(v for k, v in names.items() if not k.startswith("llamacpp:"))) == {expected}
    assert names["llamacpp:prompt_tokens_total"] == {None}
    assert f'sparkinfer_gateway_request_success_total{{finished_reason="length",model_name="{expected}"}} ' in text


def test_every_scheduler_series_names_the_served_model():
    assert parse_config([], environ={"SPARKINFER_SERVED_MODEL_NAME": "my-model"}).served_model_name == "my-model"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve_metrics("127.0.0.1", port, "my-model")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        names = model_names(reply.read().decode())
    assert names["python_info"] == {"my-model"} and set().union(*names.values()) == {"my-model"}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics?name[]=python_info", timeout=5) as reply:
        assert model_names(reply.read().decode()) == {"python_info": {"my-model"}}


def engines(text: str) -> dict:
    """Series name -> the set of engine values its samples carry (None for a sample without the label)."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, set()).add(sample.labels.get("engine"))
    return found


async def test_vllms_engine_series_carry_engine_0_as_vllms_do():
    """vLLM labels each engine series engine="0" on a server of one engine core (labelnames ["model_name", "engine"]);
    its boards group by (instance, engine) and scrapers pick engine="0". The gateway's own series are not vLLM's."""
    registry = CollectorRegistry()
    Metrics(registry)
    scheduler = engines(generate_latest(ModelLabelled(registry, "m")).decode())
    assert scheduler["sparkinfer_num_requests_running"] == {"0"}
    assert scheduler["sparkinfer_request_success_total"] == {"0"}
    assert set().union(*scheduler.values()) == {"0"}
    async with fake_gateway(FakeServing(TOKENIZER)) as (client, _):
        text = (await (await client.get("/metrics")).read()).decode()
    gateway = engines(text)
    assert gateway["sparkinfer_num_requests_running"] == {"0"} and gateway["sparkinfer_request_params_n_count"] == {"0"}
    assert gateway["sparkinfer_gateway_http_requests_total"] == {None} and gateway["http_requests_total"] == {None}
    assert {name for name, values in gateway.items() if values == {"0"}} == {
        name for name in gateway if name.startswith("sparkinfer_") and not name.startswith("sparkinfer_gateway_")}
