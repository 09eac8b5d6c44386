"""End to end: the /metrics an operator's Prometheus scrapes from the gateway and the scheduler, as vLLM's dashboards
and alerts read them: refusal counters there at 0 before the first refusal, the prompt-token counters of the two
processes equal for n > 1, the scheduler's gauges once over every target the bundled Prometheus configs scrape, and no
NaN sample on the gateway while its scheduler is down."""
import os
import re
import signal

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.stack import REPO, kill, running_gateway
from tests.e2e.test_finish_reason import wait_for

SCHEDULER_REASONS = {"invalid", "duplicate", "queue_full", "unavailable", "shutting_down"}
GATEWAY_REASONS = {"server_overloaded", "server_unavailable", "model_unloadable", "request_timeout"}
SCHEDULER_GAUGES = ("sparkinfer_num_requests_running", "sparkinfer_num_requests_waiting",
                    "sparkinfer_kv_cache_usage_perc")


def scrape(url: str, query: str = "") -> dict:
    """{(name, frozenset of labels other than model_name and engine): value} of every sample on url's
    /metrics(?query)."""
    text = httpx.get(f"{url}/metrics{query}", timeout=10).text
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = frozenset((k, v) for k, v in sample.labels.items() if k not in ("model_name", "engine"))
            samples[(sample.name, labels)] = sample.value
    return samples


def gateway_drop_rules() -> dict:
    """The metric relabelling each bundled Prometheus config applies to the gateways' scrapes, as (regex, action)."""
    with open(os.path.join(REPO, "deploy", "prometheus.yml"), encoding="utf-8") as f:
        job = next(job for job in yaml.safe_load(f)["scrape_configs"] if job["job_name"] == "sparkinfer-gateway")
    with open(os.path.join(REPO, "deploy", "k8s", "servicemonitor.yaml"), encoding="utf-8") as f:
        endpoint = next(e for e in yaml.safe_load(f)["spec"]["endpoints"] if e["port"] == "http")
    return {"compose": [(rule["regex"], rule["action"]) for rule in job.get("metric_relabel_configs", [])],
            "k8s": [(rule["regex"], rule["action"]) for rule in endpoint.get("metricRelabelings", [])]}


def kept(samples: dict, rules: list) -> dict:
    """The samples Prometheus keeps after drop rules on __name__ (its regexes are anchored at both ends)."""
    return {key: value for key, value in samples.items()
            if not any(action == "drop" and re.fullmatch(regex, key[0]) for regex, action in rules)}


def reasons(samples: dict, name: str) -> dict:
    return {dict(labels)["reason"]: value for (sample, labels), value in samples.items() if sample == name}


def test_refusal_counters_are_there_at_zero_before_the_first_refusal(engine_stack):
    with running_gateway(engine_stack) as url:
        scheduler = reasons(scrape(f"http://127.0.0.1:{engine_stack.metrics_port}"),
                            "sparkinfer_requests_rejected_total")
        gateway = reasons(scrape(url), "sparkinfer_gateway_requests_rejected_total")
    assert scheduler == {reason: 0.0 for reason in SCHEDULER_REASONS}
    assert gateway == {reason: 0.0 for reason in GATEWAY_REASONS}


def test_the_gateway_and_the_scheduler_count_the_prompts_of_n_choices_alike(engine_stack):
    """vLLM's prompt_tokens_total counts the prompt of each of an n > 1 request's children (vllm#56361 measured
    n x prompt_len); the scheduler counts each choice so, and the gateway counted the prompt once: summed over the
    replicas, the two disagreed by the prompt for every extra choice."""
    scheduler_url = f"http://127.0.0.1:{engine_stack.metrics_port}"
    key = ("sparkinfer_prompt_tokens_total", frozenset())
    gateway_key = ("sparkinfer_gateway_prompt_tokens_total", frozenset())
    with running_gateway(engine_stack) as url:
        scheduler_before, gateway_before = scrape(scheduler_url)[key], scrape(url)[gateway_key]
        response = httpx.post(f"{url}/v1/completions", timeout=60,
                              json={"prompt": "hello there, how are you", "max_tokens": 3, "n": 2})
        assert response.status_code == 200, response.text
        num_prompt = response.json()["usage"]["prompt_tokens"]
        scheduler_added = scrape(scheduler_url)[key] - scheduler_before
        gateway_added = scrape(url)[gateway_key] - gateway_before
    assert (scheduler_added, gateway_added) == (2 * num_prompt, 2 * num_prompt)


@pytest.mark.parametrize("config", ["compose", "k8s"])
def test_summed_over_the_scraped_targets_each_scheduler_gauge_counts_once(engine_stack, config):
    """The bundled Prometheus configs scrape every gateway replica and the scheduler; each gateway also serves the
    scheduler's load gauges, so sum(sparkinfer_num_requests_running) over the targets was (replicas + 1) times the
    scheduler's. With two gateways: each gauge once, from the scheduler; the gateways' own series all kept."""
    rules = gateway_drop_rules()[config]
    with running_gateway(engine_stack) as first, running_gateway(engine_stack) as second:
        raw = [scrape(url) for url in (first, second)]
    gateways = [kept(target, rules) for target in raw]
    scheduler = scrape(f"http://127.0.0.1:{engine_stack.metrics_port}")
    # Every series the gateways mirror from the scheduler (the labelled waiting_by_reason and engine_sleep_state too).
    mirrored = {key for key in scheduler if key[0].startswith("sparkinfer_") and any(key in target for target in raw)}
    assert {(name, frozenset()) for name in SCHEDULER_GAUGES} <= mirrored
    for key in mirrored:
        assert sum(key in target for target in [*gateways, scheduler]) == 1, key
    for before, after in zip(raw, gateways):
        assert {key for key in before if key[0].startswith("sparkinfer_gateway_")} <= set(after)


def test_the_schedulers_gauges_are_left_out_not_nan_while_it_is_down(make_engine_stack):
    """One NaN sample makes a sum() over the gateway replicas NaN; an exporter leaves out what it cannot read and says
    so in an _up gauge (prometheus/memcached_exporter#38). Back with the scheduler, so are the gauges."""
    stack = make_engine_stack()
    with running_gateway(stack) as url:
        assert all(scrape(url)[(name, frozenset())] == 0.0 for name in SCHEDULER_GAUGES)
        kill(stack.scheduler, signal.SIGKILL)
        assert "NaN" not in httpx.get(f"{url}/metrics", timeout=10).text
        down = scrape(url)
        assert down[("sparkinfer_gateway_scheduler_up", frozenset())] == 0.0
        assert not [name for name in SCHEDULER_GAUGES if (name, frozenset()) in down]
        stack.start_scheduler()
        stack.wait_serving()
        wait_for(lambda: scrape(url)[("sparkinfer_gateway_scheduler_up", frozenset())] == 1.0, timeout=30)
        back = scrape(url)
        assert all(back[(name, frozenset())] == 0.0 for name in SCHEDULER_GAUGES)


def test_a_scrape_naming_series_gets_those_alone_as_from_the_scheduler(engine_stack):
    """prometheus_client's handler (vLLM's /metrics, the scheduler's here) keeps only the series a scrape names with
    name[] query parameters; the gateway's /metrics ignored them and answered every series."""
    names = ["sparkinfer_gateway_requests_in_flight", "sparkinfer_gateway_scheduler_up",
             "sparkinfer_num_requests_running", "sparkinfer_gateway_time_to_first_token_seconds_count"]
    scheduler_names = ["sparkinfer_num_requests_running", "sparkinfer_e2e_request_latency_seconds_count"]
    with running_gateway(engine_stack) as url:
        gateway = scrape_named(url, names)
    scheduler = scrape_named(f"http://127.0.0.1:{engine_stack.metrics_port}", scheduler_names)
    assert sorted(gateway) == sorted(names)
    assert sorted(scheduler) == sorted(scheduler_names)


def scrape_named(url: str, names: list) -> list:
    """The names of the samples a scrape naming `names` gets."""
    return [name for name, _ in scrape(url, "?" + "&".join(f"name[]={name}" for name in names))]
