"""Unit tests: bench/scheduler_host.py, the scheduler's host time per step, measures what it says on a small load."""
import asyncio

from bench import scheduler_host
from bench.scheduler_host import Scenario, measure


def test_decode_rows_each_step_carry_every_running_request():
    row = asyncio.run(measure(Scenario("decode-8", 8), warm=5, steps=30, profile=None))
    assert row["name"] == "decode-8" and (row["running"], row["waiting"]) == (8, 0)
    # Tokens are counted as the readers take them, a step behind the planner at times.
    assert row["steps"] >= 30 and 7 <= row["tokens_per_step"] <= 9
    assert 0 < row["host_ms"] and abs(row["steps_s"] * row["host_ms"] - 1e3) < 1e-6


def test_stop_strings_end_streams_that_are_replaced():
    row = asyncio.run(measure(Scenario("stop-8", 8, stop_after=3), warm=5, steps=40, profile=None))
    # Streams end after 3-10 tokens (Finish, or the stop token) and new ones take their seats (some may be between
    # their predecessor's end and their own start as the window closes).
    assert 0 < row["running"] + row["waiting"] <= 8 and row["steps"] >= 40 and row["streams"] > 8 * 3
    assert 0 < row["tokens_per_step"] < 8


def test_the_table_names_every_scenario_of_the_brief():
    names = [s.name for s in scheduler_host.SCENARIOS]
    assert names[:4] == ["decode-1", "decode-16", "decode-64", "decode-256"]
    assert {"prefix-cache-64", "chunked-prefill-64", "stop-64", "logprobs-64", "grammar-64", "queued-1000"} <= set(names)


def test_compare_reads_an_earlier_table_and_writes_the_change(tmp_path, monkeypatch):
    monkeypatch.setattr(scheduler_host, "OUT_DIR", str(tmp_path))
    monkeypatch.setattr(scheduler_host, "pyplot", lambda what: None)
    row = {"name": "decode-8", "running": 8, "waiting": 0, "host_ms": 0.5, "steps_s": 2000.0, "tokens_per_step": 8.0}
    scheduler_host.write_outputs([row], "before", {})
    before = scheduler_host.read_table(str(tmp_path / "scheduler_host.md"))
    assert before == {"decode-8": 0.5}
    scheduler_host.write_outputs([{**row, "host_ms": 0.4, "steps_s": 2500.0}], "after", before)
    text = (tmp_path / "scheduler_host.md").read_text()
    assert "| decode-8 | 0.500 | 0.400 | -20% |" in text
