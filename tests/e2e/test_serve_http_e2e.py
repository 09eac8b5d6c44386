"""End to end: bench/serve_http.py against the real stack (deploy/launch.py, tiny model): its numbers add up, and every
process it started is gone afterwards, also when the run is interrupted."""
import csv
import os

import pytest

from bench import serve_http
from bench.serve_stack import ServeStack, _children
from tests.e2e.stack import DEFAULT_MODEL

GAUGES = {"sparkinfer_num_requests_running": 0.0, "sparkinfer_num_requests_waiting": 0.0}


@pytest.fixture(autouse=True)
def _model():
    if not os.path.isfile(os.path.join(DEFAULT_MODEL, "config.json")):
        pytest.skip("tiny checkpoint missing: run `make model`")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stack_is_stopped_with_its_children_on_an_interrupt(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKINFER_NUM_THREADS", "1")
    with pytest.raises(KeyboardInterrupt):
        with ServeStack(DEFAULT_MODEL, {}, str(tmp_path / "stack.log"), start_timeout=120) as stack:
            pids = [stack.proc.pid] + _children(stack.proc.pid)
            assert len(pids) == 4  # the launcher, scheduler, worker and gateway
            assert stack.served == "tiny" and stack.gauges() == GAUGES
            raise KeyboardInterrupt
    assert [pid for pid in pids if _alive(pid)] == []


def test_bench_run_counts_every_token(tmp_path, monkeypatch):
    monkeypatch.setenv("OUT", str(tmp_path))
    monkeypatch.setenv("SPARKINFER_NUM_THREADS", "1")
    code = serve_http.main(["--model", DEFAULT_MODEL, "--concurrency", "1,3", "--num-prompts", "3", "--input-len",
                            "12", "--output-len", "5", "--bandwidth-gbs", "100"])
    assert code == 0
    with open(tmp_path / "serve_http.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["C"]) for r in rows] == [1, 3]
    for row in rows:
        assert (int(row["requests"]), int(row["failed"]), int(row["output_tokens"])) == (3, 0, 15)
        assert float(row["output_tok_s"]) == pytest.approx(15 / float(row["wall_s"]))
        assert 0 < float(row["ttft_median_ms"]) <= float(row["e2e_median_ms"])
        assert 0 < float(row["roofline_frac"]) < 1
    assert "worker ready" in (tmp_path / "serve_http_stack.log").read_text()
