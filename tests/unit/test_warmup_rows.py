"""worker/warmup.py: the eager warm-up steps' rows are valid mixed steps of exactly n tokens (n - 2 decode rows and
one fresh 2-token prefill row, each on its own slot and blocks), and nothing runs on CPU."""
from types import SimpleNamespace

import pytest

from worker.batch import ForwardBatch
from worker.warmup import CONTEXT, warm_up_eager, warm_up_rows


@pytest.mark.parametrize("n", [2, 3, 9, 16])
def test_rows_are_a_mixed_step_of_n_tokens_on_distinct_slots_and_blocks(n):
    rows = warm_up_rows(n, 16)
    assert sum(len(r[0]) for r in rows) == n
    assert [r[1] for r in rows] == [CONTEXT] * (n - 2) + [0]
    assert len({r[2] for r in rows}) == len(rows)
    blocks = [b for r in rows for b in r[3]]
    assert len(blocks) == len(set(blocks)) and all(len(r[3]) * 16 > r[1] + len(r[0]) - 1 for r in rows)
    batch = ForwardBatch.from_rows(rows, 16)
    assert batch.input_ids.numel() == n


def test_nothing_runs_on_cpu():
    cache = SimpleNamespace(device=SimpleNamespace(type="cpu"))
    assert warm_up_eager(SimpleNamespace(cache=cache), verbose=False) == 0
