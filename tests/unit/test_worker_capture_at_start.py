"""worker.server.capture_at_start: every padded row count's decode graph and every padded token count's piecewise
prefill graphs are captured before the worker reports ready (so no first request pays for a capture and its kernels'
compile), unless SPARKINFER_CAPTURE_AT_START=0 or there are no graphs (CPU)."""
from types import SimpleNamespace

from worker import server

CPU_CACHE = SimpleNamespace(device=SimpleNamespace(type="cpu"))  # the eager warm-up (worker/warmup.py) skips CPU


class _Graphs:
    def __init__(self, sizes=(1, 2, 4, 8)):
        self.sizes, self.calls = list(sizes), 0

    def capture_all(self):
        self.calls += 1


def test_captures_every_row_count_by_default(monkeypatch, capsys):
    monkeypatch.delenv(server.CAPTURE_ENV, raising=False)
    graphs, prefill = _Graphs(), _Graphs((32, 64, 96))
    server.capture_at_start(SimpleNamespace(graphs=graphs, prefill_graphs=prefill, cache=CPU_CACHE))
    assert graphs.calls == 1 and prefill.calls == 1
    out = capsys.readouterr().out
    assert "capturing the decode graphs for 4 row counts" in out and "SPARKINFER_CAPTURE_AT_START=0" in out
    assert "decode graphs captured in" in out
    assert "capturing the prefill graphs for 3 token counts" in out and "prefill graphs captured in" in out


def test_switched_off_or_without_graphs_nothing_is_captured(monkeypatch, capsys):
    monkeypatch.setenv(server.CAPTURE_ENV, "0")
    graphs, prefill = _Graphs(), _Graphs()
    server.capture_at_start(SimpleNamespace(graphs=graphs, prefill_graphs=prefill, cache=CPU_CACHE))
    assert graphs.calls == 0 and prefill.calls == 0
    monkeypatch.delenv(server.CAPTURE_ENV)
    server.capture_at_start(SimpleNamespace(graphs=None, prefill_graphs=None, cache=CPU_CACHE))
    assert capsys.readouterr().out == ""
