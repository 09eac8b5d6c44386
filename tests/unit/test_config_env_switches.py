"""Unit tests: an on/off SPARKINFER_* variable set to another value than its switch words stops the gateway and the
worker at their start with a line naming it. SPARKINFER_ACCESS_LOG=off logged every request, SPARKINFER_ALLOW_CREDENTIALS
=yes and SPARKINFER_CUDA_GRAPHS=true left their switch off, without a word (README, Configuration: a value of no
known name stops the process)."""
import pytest

from gateway.config import parse_config
from tests.unit.test_readme_config import ROOT, _used_by, table
from worker.server import parse_config as parse_worker_config
from worker.switches import SWITCHES

GATEWAY_SWITCHES = {  # variable -> the config field it sets, and the value that field has when the switch is on
    "SPARKINFER_ACCESS_LOG": ("access_log", True),
    "SPARKINFER_ALLOW_CREDENTIALS": ("allow_credentials", True),
    "SPARKINFER_EXCLUDE_TOOLS_WHEN_TOOL_CHOICE_NONE": ("exclude_tools_when_tool_choice_none", True),
    "SPARKINFER_TRUST_REQUEST_CHAT_TEMPLATE": ("trust_request_chat_template", True),
}


@pytest.mark.parametrize("name", sorted(GATEWAY_SWITCHES))
@pytest.mark.parametrize("value", ["yes", "off", "2", "enabled"])
def test_gateway_names_a_switch_set_to_no_switch_word(monkeypatch, capsys, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as stop:
        parse_config([])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m gateway.app: error: {name}={value!r} is not a switch: 1 (or true) turns it on, 0 (or false) off")


@pytest.mark.parametrize("name", sorted(GATEWAY_SWITCHES))
@pytest.mark.parametrize("value, on", [("1", True), ("true", True), ("TRUE", True), ("0", False), ("False", False)])
def test_gateway_reads_each_switch_word(monkeypatch, name, value, on):
    monkeypatch.setenv(name, value)
    field, when_on = GATEWAY_SWITCHES[name]
    assert getattr(parse_config([]), field) is (when_on if on else not when_on)


@pytest.mark.parametrize("name, value", [("SPARKINFER_CUDA_GRAPHS", "true"), ("SPARKINFER_DECODE_MMA", "false"),
                                         ("SPARKINFER_NVFP4_PDL", "on"), ("SPARKINFER_CAPTURE_AT_START", "")])
def test_worker_names_a_switch_set_to_no_switch_word(capsys, name, value):
    """The kernels read these as `== "1"` (SPARKINFER_DECODE_MMA as `!= "0"`): true was off, false was on."""
    with pytest.raises(SystemExit) as stop:
        parse_worker_config([], environ={name: value})
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m worker.server: error: {name}={value!r} is not a switch: 1 turns it on, 0 off")


def test_worker_names_a_paged_decode_choice_it_does_not_know(capsys):
    with pytest.raises(SystemExit):
        parse_worker_config([], environ={"SPARKINFER_PAGED_DECODE": "kernels"})
    assert capsys.readouterr().err.splitlines()[-1] == (
        "python -m worker.server: error: SPARKINFER_PAGED_DECODE='kernels' is not one of auto, 1, 0")


def test_worker_starts_with_every_switch_on_or_off():
    for value in ("0", "1"):
        parse_worker_config([], environ={**{name: value for name in SWITCHES}, "SPARKINFER_PAGED_DECODE": "auto"})


def test_every_documented_worker_switch_is_checked():
    """Each worker variable README's Configuration table gives the default 1 (or `1` on CUDA) is an on/off switch:
    a new one missing from worker.switches.SWITCHES would again take "true" as off."""
    readme = (ROOT / "README.md").read_text()
    worker_rows = {name for name, processes in _used_by(readme).items() if processes == {"worker"}}
    documented = {name for name, default in table(readme).items() if name in worker_rows and default == "1"}
    assert documented and sorted(documented - set(SWITCHES)) == []
