"""request_success_total has its stop, length, abort, error and repetition series at 0 from the start, on the
scheduler and the gateway, as vLLM makes one per FinishReason (vllm/v1/metrics/loggers.py): a series that first
appears at 1 is missed by rate() and increase(), so a dashboard never counted the first request of each kind."""
import os
import subprocess
import sys

from prometheus_client import CollectorRegistry, generate_latest

from scheduler.metrics import Metrics

EXPECTED = {'{finished_reason="stop"} 0.0', '{finished_reason="length"} 0.0', '{finished_reason="abort"} 0.0',
            '{finished_reason="error"} 0.0', '{finished_reason="repetition"} 0.0'}


def success_lines(text: str, name: str) -> set:
    return {line[len(name):] for line in text.splitlines() if line.startswith(name + "{")}


def test_the_schedulers_series_are_there_before_any_request():
    registry = CollectorRegistry()
    Metrics(registry)
    assert success_lines(generate_latest(registry).decode(), "sparkinfer_request_success_total") == EXPECTED


def test_the_gateways_series_are_there_before_any_request():
    # A fresh process: the gateway's registry is process-wide, and other tests in this one have counted requests.
    code = "from gateway import metrics; print(metrics.render()[0].decode())"
    text = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert success_lines(text, "sparkinfer_gateway_request_success_total") == EXPECTED


def test_readme_names_every_finished_reason_the_series_has():
    # README's Metrics table gave stop, length, abort and error: a repetition stop's series was there unexplained.
    from proto.metrics_label import FINISHED_REASONS
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md"), encoding="utf-8").read()
    row = next(line for line in readme.splitlines() if line.startswith("| `sparkinfer_request_success_total"))
    assert [reason for reason in FINISHED_REASONS if f"`{reason}`" not in row] == []
