"""Worker CPU threading defaults: the worker leaves cores to the scheduler and gateway, and never spins idle."""
import os
import subprocess
import sys

from worker.server import cpu_threads


def test_requested_threads_win():
    assert cpu_threads(3) == 3


def test_default_leaves_two_cores_but_keeps_one(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert cpu_threads(0) == 6
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert cpu_threads(0) == 1


def test_openmp_waits_passively_unless_told_otherwise():
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    code = "import os, worker.server; print(os.environ['OMP_WAIT_POLICY'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "PASSIVE"
    env["OMP_WAIT_POLICY"] = "ACTIVE"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ACTIVE"
