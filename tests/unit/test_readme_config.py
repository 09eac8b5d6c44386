"""README's Configuration table against the code: every SPARKINFER_* variable a process reads is listed with its real
default, and every variable listed is read somewhere (test_deploy_files.py checks what compose and deploy/k8s set);
`python -m gateway.app --help` names every route SPARKINFER_API_KEY leaves open.

Session 21 found 14 worker switches (SPARKINFER_NVFP4_SK, _WSB, _XS, SPARKINFER_DENSE_PDL, SPARKINFER_GDN_DECODE_BF16,
...) and compose's SPARKINFER_MODEL_DIR read but missing from the table.
"""
import re
from pathlib import Path

import pytest

from deploy import watchdog
from gateway.app import _OPEN_PATHS
from gateway.config import GatewayConfig, parse_config
from scheduler.config import ENV_NAMES as SCHEDULER_ENV, SchedulerConfig
from worker.server import ENV_NAMES as WORKER_ENV, WorkerConfig

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ("gateway", "scheduler", "worker", "deploy", "kernels")
# A quoted name: the environ.get / ENV_NAMES / ENV constants; prose in docstrings and help texts is not quoted so.
_QUOTED = re.compile(r"""["'](SPARKINFER_[A-Z0-9_]+)["']""")
_ENV_GET = re.compile(r"""environ\.get\(\s*"(SPARKINFER_[A-Z0-9_]+)"\s*,\s*"([^"]*)"\s*\)""")
# The gateway's and launcher's flag defaults: env_number(parser, NAME, default), env_switch(...) and _env(NAME, default).
_FLAG_DEFAULT = re.compile(
    r"""(?:env_number\(parser, |env_switch\(parser, |_env\()\s*("SPARKINFER_[A-Z0-9_]+"|watchdog\.ENV)\s*,\s*([^,)]+)""")


def _sources():
    for folder in CODE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path, path.read_text()


def names_read() -> set:
    """Every SPARKINFER_* name the Python processes read, plus those compose.yaml substitutes itself."""
    found = {m for _, text in _sources() for m in _QUOTED.findall(text)}
    return found | set(re.findall(r"\$\{(SPARKINFER_[A-Z0-9_]+)", (ROOT / "compose.yaml").read_text()))


def table(readme: str) -> dict:
    """README's Configuration table: variable -> its default as written (one backticked value per name of a row that
    lists several, `A` / `B`; else the cell's first backticked value, or the cell)."""
    section = readme[readme.index("## Configuration"):readme.index("## Architecture")]
    rows = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        names, defaults = re.findall(r"SPARKINFER_[A-Z0-9_]+", cells[0]), re.findall(r"`([^`]*)`", cells[1])
        for i, name in enumerate(names):
            rows[name] = defaults[i] if len(defaults) == len(names) else (defaults[0] if defaults else cells[1])
    return rows


@pytest.fixture(scope="module")
def documented():
    return table((ROOT / "README.md").read_text())


def test_every_variable_read_is_documented(documented):
    assert sorted(names_read() - set(documented)) == []


def test_every_documented_variable_is_read(documented):
    assert sorted(set(documented) - names_read()) == []


def _used_by(readme: str) -> dict:
    """README's Configuration table: variable -> the processes its "used by" cell names (gateway, scheduler, worker)."""
    section = readme[readme.index("## Configuration"):readme.index("## Architecture")]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if line.startswith("| `") and len(cells) > 2:
            for name in re.findall(r"SPARKINFER_[A-Z0-9_]+", cells[0]):
                rows[name] = {process for process in ("gateway", "scheduler", "worker") if process in cells[2]}
    return rows


def test_used_by_names_the_processes_that_read_it():
    """A variable documented for one process but read by another (moved from the gateway to the scheduler, or a
    worker switch the kernels read) set the wrong process's environment in a deployment that splits them (compose,
    deploy/k8s); the kernels run in the worker, deploy/ is the launcher (`make run`), not a process of its own."""
    sources = {folder: "".join(path.read_text() for path in (ROOT / folder).rglob("*.py"))
               for folder in ("gateway", "scheduler", "worker", "kernels")}
    wrong = {}
    for name, documented in _used_by((ROOT / "README.md").read_text()).items():
        quoted = re.compile(rf"""["']{name}["']""")
        readers = {"worker" if folder == "kernels" else folder
                   for folder, text in sources.items() if quoted.search(text)}
        if readers != documented:
            wrong[name] = (sorted(documented), sorted(readers))
    assert wrong == {}


def _same(code_default, written: str) -> bool:
    try:
        return float(code_default) == float(written)
    except ValueError:
        return str(code_default) == written


def _code_defaults():
    """(name, the code's default) for every variable read with a literal default, as a gateway or launcher flag's
    default, or through the scheduler's or worker's config dataclass."""
    for path, text in _sources():
        for name, default in _ENV_GET.findall(text):
            yield pytest.param(name, default, id=f"{path.relative_to(ROOT)}:{name}")
    scope = {"d": GatewayConfig(), "watchdog": watchdog}
    for path in ("gateway/config.py", "deploy/launch.py"):
        for name, default in _FLAG_DEFAULT.findall((ROOT / path).read_text()):
            # None and "" stand for unset (the key, the model name, the excluded paths)
            if eval(default, scope) not in (None, ""):
                yield pytest.param(eval(name, scope), eval(default, scope), id=f"{path}:{eval(name, scope)}")
    for config, env_names in ((SchedulerConfig(), SCHEDULER_ENV), (WorkerConfig(), WORKER_ENV)):
        for field, name in env_names.items():
            # "" stands for a default worked out at start (the gRPC host, the checkpoint's id, the device's dtype)
            if getattr(config, field) != "":
                yield pytest.param(name, getattr(config, field), id=f"{type(config).__name__}.{field}")


@pytest.mark.parametrize("name, code_default", list(_code_defaults()))
def test_documented_default_is_the_codes(documented, name, code_default):
    written = documented[name]
    if name == "SPARKINFER_NUM_THREADS":  # 0 = worked out at start: README gives the rule
        assert code_default == 0 and "cores" in written
        return
    assert _same(code_default, written), f"{name}: README says {written!r}, the code {code_default!r}"


def test_gateway_help_names_every_route_the_api_key_leaves_open(capsys):
    """--help listed /, /health, /ping, /metrics and /version: not /v1/health, /health_generate or llama.cpp's
    /models, which gateway/app.py's check_api_key leaves open too (README's SPARKINFER_API_KEY row lists all)."""
    with pytest.raises(SystemExit):
        parse_config(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    missing = [path for path in _OPEN_PATHS if not re.search(rf"(?<![\w/]){re.escape(path)}(?![\w/])", text)]
    assert missing == []


def test_launch_help_says_the_environment_reaches_the_three_processes(capsys):
    """`python -m deploy.launch --help` named three flags only (--model, --wait-timeout, --worker-hung-s), so the port
    or any other setting looked fixed; README's Configuration says `make run` passes the environment on to all three
    processes and points at each one's --help."""
    from deploy.launch import parse_args
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "SPARKINFER_PORT=8081" in text
    assert [name for name in ("gateway.app", "scheduler.server", "worker.server") if f"{name} --help" not in text] == []


@pytest.mark.parametrize("module, env_names", [("scheduler.config", SCHEDULER_ENV), ("worker.server", WORKER_ENV)],
                         ids=["scheduler", "worker"])
def test_scheduler_and_worker_help_say_what_each_flag_sets(capsys, module, env_names):
    """Their --help gave each flag only its variable and default ('--max-queue-depth (env SPARKINFER_MAX_QUEUE_DEPTH,
    default 0)'), so 0 = unlimited, 0 = the checkpoint's context or 0 = 128 MiB could not be told from it; README's
    Configuration points at each process's --help."""
    import importlib
    with pytest.raises(SystemExit):
        importlib.import_module(module).parse_config(["--help"], environ={})
    text = " ".join(capsys.readouterr().out.split())
    bare = [name for field, name in env_names.items()
            if not re.search(rf"--{field.replace('_', '-')} [A-Z_]+ \w[^()]*?\S.*?\(env {name},", text)]
    assert bare == []
