"""README's commands and file paths against the repository: every path it names exists, every `python -m` module it
runs is there and takes the flags README gives it, every `make` target it names is in the Makefile, and every
environment variable it sets (SPARKINFER_*, the benches' GPU_MODEL_*) is read by some code.

test_readme_config.py checks the Configuration table alone; a path, a flag or a variable named in README's prose or
in a code block drifted unseen there (a script moved, a flag renamed, a bench switch dropped).
"""
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CODE_DIRS = ("gateway", "scheduler", "worker", "deploy", "kernels", "bench", "proto", "tests")
# Paths of other projects that README cites as references (llama-cpp-python's server, vLLM's benchmark script).
FOREIGN = {"llama_cpp/server/app.py", "benchmarks/benchmark_serving.py"}
# Files of a checkpoint folder README describes; `make model` writes them under models/tiny.
CHECKPOINT_FILES = {"config.json", "generation_config.json", "tokenizer_config.json", "tokenizer.json",
                    "chat_template.jinja", "model.safetensors"}
_FILE = re.compile(r"^[\w./-]+\.(?:py|cu|cuh|yaml|yml|jinja|proto|md|txt|json|toml|cfg|ini)$")
_MODULE = re.compile(r"python3? -m ([a-z_][\w.]*)((?: +[^ ]+)*)")


def _fenced_blocks() -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", README, flags=re.S | re.M)


def _inline_spans() -> list[str]:
    """Backticked spans outside the fenced blocks, a span's line breaks read as spaces."""
    prose = re.sub(r"^```[a-z]*\n.*?^```", "", README, flags=re.S | re.M)
    return [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose.replace("``", ""))]


def _commands() -> list[str]:
    """Each command README gives: a backticked span, or a line of a fenced shell block (its comment cut off)."""
    lines = [line.split(" # ")[0] for block in _fenced_blocks() for line in block.splitlines()]
    return [command for command in _inline_spans() + lines if "python" in command or "make " in command]


def _tracked() -> set[str]:
    return {str(path.relative_to(ROOT)) for path in ROOT.rglob("*") if ".venv" not in path.parts}


def test_every_file_path_readme_names_exists():
    tracked = _tracked()
    names = {path.rsplit("/", 1)[-1] for path in tracked}
    missing = []
    for span in set(_inline_spans()):
        for word in span.split():
            word = word.strip("(),;:")
            # OLD.md, OLD.csv: a placeholder the reader fills in
            placeholder = word.rsplit("/", 1)[-1].split(".")[0].isupper()
            if not _FILE.match(word) or placeholder or word in FOREIGN | CHECKPOINT_FILES or word.startswith("../"):
                continue
            # A bare file name ("gemv_pick.py") stands for the one of that name beside the path README gave before it.
            if word not in tracked and ("/" in word or word not in names):
                missing.append(word)
    assert sorted(set(missing)) == []


def test_every_test_path_readme_names_exists():
    """tests/... paths, also globbed ones (`tests/unit/test_gateway_*.py`) and those with a `::test` id."""
    paths = set(re.findall(r"tests/[\w/*]+\.py(?:::\w+)?", README))
    missing = []
    for path in paths:
        file, _, test = path.partition("::")
        found = sorted(ROOT.glob(file))
        if not found or (test and not re.search(rf"def {test}\(", found[0].read_text())):
            missing.append(path)
    assert sorted(missing) == []


def _module_file(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"python -m {module}: no such module"
    return Path(spec.origin)


@pytest.mark.parametrize("module", sorted({m for c in _commands() for m, _ in _MODULE.findall(c)} - {"pytest"}))
def test_every_module_readme_runs_takes_the_flags_it_gives(module):
    """The flags README passes to `python -m MODULE` (`--long-output`, `--arch`, ...) are ones the module's argparse
    defines: a flag renamed in the code left a command in README that argparse refuses."""
    flags = {flag for command in _commands() for m, args in _MODULE.findall(command) if m == module
             for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", args)} - {"--help"}
    source = _module_file(module).read_text()
    assert sorted(flag for flag in flags if f'"{flag}"' not in source and f"'{flag}'" not in source) == []


def test_every_make_target_readme_names_is_in_the_makefile():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, flags=re.M))
    named = {target for command in _commands() for target in re.findall(r"(?<![\w-])make ([a-z][\w-]*)", command)}
    assert sorted(named - targets) == []


def test_every_variable_readme_sets_is_read():
    """SPARKINFER_* (also outside the Configuration table) and the GPU benches' GPU_MODEL_* switches."""
    code = "".join(path.read_text() for folder in CODE_DIRS for path in (ROOT / folder).rglob("*.py"))
    code += (ROOT / "compose.yaml").read_text() + (ROOT / "Makefile").read_text()
    named = set(re.findall(r"\b((?:SPARKINFER|GPU_MODEL)_[A-Z0-9_]*[A-Z0-9])\b", README))
    assert sorted(name for name in named if name not in code) == []


def test_every_table_row_is_one_line():
    """A row wrapped onto the next lines ends there in Markdown: its continuation renders as rows of its own, text in
    the first column (the /health row of the routes table lost its 503 and /metrics description so)."""
    prose = re.sub(r"^```[a-z]*\n.*?^```", "", README, flags=re.S | re.M)
    broken, in_table = [], False
    for line in prose.splitlines():
        if line.startswith("| ---"):
            in_table = True
        elif not line.strip():
            in_table = False
        elif in_table and not (line.startswith("|") and line.rstrip().endswith("|")):
            broken.append(line[:80])
    assert broken == []
