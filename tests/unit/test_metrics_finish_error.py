"""Unit tests: a request the server failed is counted under request_success_total{finished_reason="error"}, one its
client left under "abort", as vLLM's FinishReason tells them apart (vllm/v1/engine/__init__.py: abort "aborted by
client", error "request-level internal error"). A lost worker or a failed step counted as "abort", so the Finish
Reason panel of a vLLM dashboard showed an engine failing every request as clients cancelling."""

import pytest

from proto import pb
from scheduler.admission import StepFailedError
from tests.unit.test_scheduler_engine import drain, make_engine, request
from tests.unit.test_scheduler_engine_metrics import _sample


class FailingWorker:
    """Answers the first step it gets with a StepResult that failed (the worker's forward raised)."""

    def run(self, step):
        return pb.StepResult(step_id=step.step_id, error="CUDA error: an illegal memory access was encountered")


def success(engine, reason: str) -> float:
    return _sample(engine.metrics.request_success, "_total", finished_reason=reason)


async def test_a_failed_step_counts_error_not_abort():
    engine, link = await make_engine()
    link.worker = FailingWorker()
    with pytest.raises(StepFailedError):
        await drain(engine.submit(request("a")))
    assert (success(engine, "error"), success(engine, "abort")) == (1, 0)
    assert _sample(engine.metrics.e2e_request_latency, "_count") == 1
    await engine.stop()
