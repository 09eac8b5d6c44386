"""Unit test: every command README gives as `python -m PACKAGE.MODULE` names itself so in its usage and its one-line
errors. argparse's default is the file's name (`quantize.py: error: ...`, `soak.py: error: ...`), which a user who
typed `python -m kernels.nvfp4.quantize` cannot run as shown."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_PROG = re.compile(r"""\s*prog=["']python3? -m ([\w.]+)["']""")


def test_every_command_line_parser_names_a_module_it_runs_as():
    """The name is a module of this repo (gateway/config.py's parser is `python -m gateway.app`'s)."""
    wrong = []
    for folder in ("gateway", "scheduler", "worker", "deploy", "kernels", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text()
            for call in re.finditer(r"argparse\.ArgumentParser\(", text):
                named = _PROG.match(text, call.end())
                if not named or not (ROOT / (named.group(1).replace(".", "/") + ".py")).is_file():
                    wrong.append(f"{path.relative_to(ROOT)}: {text[call.end():call.end() + 60]!r}")
    assert wrong == []
