"""House style's size limits (/work/shared/style.md, the rules every change follows): each source file under 300
lines, each test file under 500, each function under 50 lines, over every Python file git tracks. Session 28 landed
gateway/openai_schema.py at 301 lines and create_app at 52, beside work that kept to them, with nothing to say so."""
import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_SOURCE_LINES, MAX_TEST_LINES, MAX_FUNCTION_LINES = 300, 500, 50


def _tracked() -> list:
    names = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / name for name in names.stdout.split() if (ROOT / name).is_file()]


def test_files_and_functions_keep_to_the_house_limits():
    over = []
    for path in _tracked():
        text = path.read_text(encoding="utf-8")
        name = str(path.relative_to(ROOT))
        limit = MAX_TEST_LINES if name.startswith("tests/") else MAX_SOURCE_LINES
        if text.count("\n") > limit:
            over.append(f"{name}: {text.count(chr(10))} lines (at most {limit})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    over.append(f"{name}: {node.name} is {size} lines (at most {MAX_FUNCTION_LINES})")
    assert over == []
