"""tests/e2e/stack.free_ports: the port-pair search the end-to-end stacks use (ZeroMQ step + result ports)."""
from tests.e2e import stack


def test_each_try_is_a_fresh_candidate(monkeypatch):
    """With consecutive=True every try checks the port just bound: the search used to retry the largest port held, so
    once that one's successor was taken (TIME_WAIT after a long run) 200 tries failed with "no 2 free ports found"
    (session 13, tests/e2e/test_openai_launch.py in a full run). Here the first three candidates are refused."""
    real_bind_run = stack._bind_run
    seen = []

    def bind_run(held, first, count):
        seen.append(first)
        return len(seen) > 3 and real_bind_run(held, first, count)

    monkeypatch.setattr(stack, "_bind_run", bind_run)
    ports = stack.free_ports(2, consecutive=True)
    assert ports[1] == ports[0] + 1 and ports[0] == seen[-1]
    assert len(set(seen)) == len(seen)
