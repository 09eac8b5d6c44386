"""Every test file's name is unique under tests/: the suite runs in pytest's default "prepend" import mode with no
__init__.py in tests/unit or tests/e2e, so each file is imported as a top-level module named after its basename, and
a second file of the same name stops the whole run at collection ("import file mismatch"; pytest's docs, "Choosing
an import mode"). tests/e2e/test_repetition_stop.py beside tests/unit/test_repetition_stop.py did that to `make test`."""
import collections
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent.parent


def test_no_two_test_files_share_a_name():
    seen = collections.defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        seen[path.name].append(str(path.relative_to(TESTS)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}
