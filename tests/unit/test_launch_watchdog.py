"""deploy/watchdog.HungWorker: when the launcher kills a worker the scheduler counts dead while its process runs."""
from deploy.watchdog import POLL_S, HungWorker


def _watch(answers: list, grace_s: float = 10.0) -> tuple:
    """A HungWorker whose probe answers come from `answers` (None: a live worker, else a reason), and the times
    polled."""
    it = iter(answers)
    watch = HungWorker(lambda: next(it), grace_s)
    return watch, [i * POLL_S for i in range(len(answers))]


def test_a_worker_that_served_then_stays_down_is_hung_after_the_grace():
    answers = [None, None] + ["worker_down"] * 7
    watch, times = _watch(answers)
    verdicts = [watch.hung(t) for t in times]
    # down from t = 4 s; hung once 10 s have passed (t = 14 s), not before
    assert verdicts == [False] * 7 + [True, True]


def test_a_worker_still_loading_is_never_hung():
    watch, times = _watch(["worker_down"] * 30)
    assert not any(watch.hung(t) for t in times)


def test_recovery_restart_and_other_reasons_reset_the_clock():
    answers = [None] + ["worker_down"] * 4 + [None] + ["worker_down"] * 4 + ["unreachable"] \
        + ["worker_down"] * 4
    watch, times = _watch(answers)
    assert not any(watch.hung(t) for t in times)   # no run of worker_down lasts 10 s
    watch, times = _watch([None] + ["worker_down"] * 10)
    watch.hung(times[0])
    watch.restarted()                              # a new process: it must serve first
    assert not any(watch.hung(t) for t in times[1:])


def test_polls_at_most_every_poll_s_and_zero_turns_it_off():
    calls = []
    watch = HungWorker(lambda: calls.append(1), 10.0)
    for t in (0.0, 0.5, 1.0, POLL_S, POLL_S + 0.1):
        watch.hung(t)
    assert len(calls) == 2
    off = HungWorker(lambda: calls.append(1) or "worker_down", 0.0)
    assert not any(off.hung(t * POLL_S) for t in range(20)) and len(calls) == 2
