"""Worker message validation: a step whose rows share a GDN state slot, or that snapshots into a row's slot, fails
(StepError) instead of running one sequence's recurrent state over another's. The scheduler never plans either
(tests/unit/test_scheduler_fuzz.py); the worker checks every other part of a step's shape already (slots in range, token
counts, block tables), as style.md asks of what crosses a process boundary."""
from proto import pb
from tests.unit.test_worker_pipeline import _setup, tiny  # noqa: F401  (tiny: the fixture)


def _step(rows: list, snapshots: tuple = ()) -> "pb.PackedStep":
    """A first step for each (req_id, slot, block id) of `rows`, 20 prompt tokens each."""
    step = pb.PackedStep(step_id=1, session_id="s")
    for req_id, slot, block in rows:
        step.new_requests.add(req_id=req_id, sampling=pb.SamplingParams(), prompt_token_ids=list(range(5, 25)))
        step.rows.add(req_id=req_id, num_tokens=20, context_len=0, state_slot=slot, block_table=[block, block + 1],
                      sample=True)
        step.token_ids.extend(range(5, 25))
    for src, dst in snapshots:
        step.snapshot_states.add(src_slot=src, dst_slot=dst)
    return step


def test_two_rows_on_one_state_slot_fail_the_step(tiny):
    _, runner = _setup(tiny)
    error = runner.execute(_step([("x", 1, 2), ("y", 1, 6)])).error
    assert "two rows of step 1 hold state slot 1" in error    # before: no error, y's state written over x's
    assert not runner.execute(_step([("x", 1, 2), ("y", 2, 6)])).error


def test_a_snapshot_into_a_rows_slot_fails_the_step(tiny):
    _, runner = _setup(tiny)
    error = runner.execute(_step([("x", 1, 2), ("y", 2, 6)], snapshots=[(1, 2)])).error
    assert "snapshots into state slot 2, which one of its rows holds" in error    # before: y's state replaced by x's
    assert not runner.execute(_step([("x", 1, 2), ("y", 2, 6)], snapshots=[(1, 3)])).error
