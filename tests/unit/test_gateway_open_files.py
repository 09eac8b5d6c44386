"""Out of file descriptors, the gateway logs one line per interval, not a traceback per waiting connection, and it
raises its soft open-file limit to the hard one at start (gateway.open_files)."""
import asyncio
import errno
import logging
import resource

import pytest

from gateway import open_files
from gateway.open_files import ACCEPT_EXHAUSTED, ACCEPT_LOG_INTERVAL_S, AcceptErrorHandler, raise_open_files_limit


def _accept_context() -> dict:
    return {"message": ACCEPT_EXHAUSTED, "exception": OSError(errno.EMFILE, "Too many open files")}


def test_a_storm_of_accept_errors_is_one_warning_line_per_interval(caplog):
    now = [100.0]
    handler = AcceptErrorHandler(clock=lambda: now[0])
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.INFO):
            # asyncio's accept loop reports the error once per connection waiting in the backlog, then again at
            # every retry: thousands within a second.
            for _ in range(5000):
                handler(loop, _accept_context())
            now[0] += ACCEPT_LOG_INTERVAL_S
            handler(loop, _accept_context())
    finally:
        loop.close()
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 2
    assert all(r.exc_info is None for r in lines)
    assert "cannot accept new connections: Too many open files" in lines[0].getMessage()
    assert "4999 more such errors" in lines[1].getMessage()


def test_other_loop_errors_still_reach_asyncios_handler(caplog):
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            AcceptErrorHandler()(loop, {"message": "Task exception was never retrieved"})
    finally:
        loop.close()
    assert [r.getMessage() for r in caplog.records] == ["Task exception was never retrieved"]


@pytest.mark.parametrize("soft, hard, expected", [(1024, 524288, 524288), (4096, 4096, 4096),
                                                  (1024, resource.RLIM_INFINITY, 65535)],
                         ids=["raised-to-hard", "already-at-hard", "unlimited-hard"])
def test_the_soft_open_file_limit_is_raised_to_the_hard_one(monkeypatch, soft, hard, expected):
    limits = {resource.RLIMIT_NOFILE: (soft, hard)}
    monkeypatch.setattr(open_files.resource, "getrlimit", lambda which: limits[which])
    monkeypatch.setattr(open_files.resource, "setrlimit", lambda which, value: limits.__setitem__(which, value))
    assert raise_open_files_limit() == (soft, expected)
    assert limits[resource.RLIMIT_NOFILE] == (expected, hard)
