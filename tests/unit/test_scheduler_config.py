"""Unit tests: the scheduler's config dataclass from flags and SPARKINFER_* variables."""
import os

import pytest

from scheduler.config import SchedulerConfig, parse_config


def test_defaults():
    config = parse_config([], environ={})
    assert config == SchedulerConfig()
    assert config.grpc_port == 50051 and config.max_queue_depth == 0


def test_env_fills_and_flags_win():
    env = {"SPARKINFER_MAX_NUM_BATCHED_TOKENS": "512", "SPARKINFER_MAX_QUEUE_DEPTH": "7",
           "SPARKINFER_GRPC_PORT": "6000", "SPARKINFER_WORKER_ADDR": "tcp://scheduler:5557"}
    config = parse_config(["--max-queue-depth", "3"], environ=env)
    assert (config.max_num_batched_tokens, config.max_queue_depth, config.grpc_port) == (512, 3, 6000)
    assert config.worker_addr == "tcp://scheduler:5557"
    assert "max_queue_depth=3" in config.describe()


@pytest.mark.parametrize("argv", [["--max-num-seqs", "many"], ["--max-num-seqs", "0"], ["--max-queue-depth", "-1"]],
                         ids=["not-int", "zero-seqs", "negative-depth"])
def test_bad_values_exit(argv):
    with pytest.raises(SystemExit):
        parse_config(argv, environ={})


def test_scheduler_process_never_imports_torch():
    import subprocess
    import sys
    code = "import sys, scheduler.server, scheduler.engine; print('torch' in sys.modules)"
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
