"""Shared e2e fixtures: the real scheduler + worker on free loopback ports (see tests/e2e/stack.py).

  engine_stack        module-scoped running stack (tiny model); use .grpc_addr
  make_engine_stack   factory: make_engine_stack(env={...}, start=True) -> EngineStack, killed at test end
"""
import os

import pytest

from tests.e2e.stack import DEFAULT_MODEL, EngineStack, running_gateway


def _require_model() -> None:
    if not os.path.isfile(os.path.join(DEFAULT_MODEL, "config.json")):
        pytest.skip("tiny checkpoint missing: run `make model`")


@pytest.fixture(scope="module")
def engine_stack():
    _require_model()
    with EngineStack() as stack:
        yield stack


@pytest.fixture
def make_engine_stack():
    _require_model()
    stacks = []

    def make(env=None, worker_env=None, start=True) -> EngineStack:
        stack = EngineStack(env=env, worker_env=worker_env)
        stacks.append(stack)
        return stack.__enter__() if start else stack

    yield make
    for stack in stacks:
        stack.close()


@pytest.fixture(scope="module")
def api_gateway(engine_stack):
    """A gateway process over this module's engine stack; yields its base URL."""
    with running_gateway(engine_stack) as url:
        yield url
