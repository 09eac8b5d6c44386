"""Unit test: `python -m gateway.app --help` and `python -m deploy.launch --help` give each numeric or address
setting's default, the one README's Configuration table gives, as the scheduler's and worker's --help do. They named
only the variable (`--port PORT  HTTP port (SPARKINFER_PORT)`), so a new user reading --help could not tell which
port, scheduler address or timeout a bare start uses."""
import re

import pytest

from deploy.launch import parse_args
from gateway.config import parse_config
from tests.unit.test_readme_config import ROOT, table

GATEWAY = ("SPARKINFER_HOST", "SPARKINFER_PORT", "SPARKINFER_SCHEDULER_ADDR", "SPARKINFER_SSE_KEEPALIVE_SECONDS",
           "SPARKINFER_BODY_TIMEOUT_S", "SPARKINFER_KEEP_ALIVE_TIMEOUT_S", "SPARKINFER_DRAIN_GRACE_S")
LAUNCHER = ("SPARKINFER_LAUNCH_TIMEOUT_S", "SPARKINFER_WORKER_HUNG_S")


def _help(parse, monkeypatch, capsys, names) -> str:
    for name in names:  # the defaults, not a value this shell set
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit):
        parse(["--help"])
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("parse, names", [(parse_config, GATEWAY), (parse_args, LAUNCHER)], ids=["gateway", "launch"])
def test_help_gives_the_documented_default(monkeypatch, capsys, parse, names):
    text = _help(parse, monkeypatch, capsys, names)
    documented = table((ROOT / "README.md").read_text())
    missing = [f"{name}, default {documented[name]}" for name in names
               if not re.search(rf"{name}, default {re.escape(documented[name])}[;)]", text)]
    assert missing == []
