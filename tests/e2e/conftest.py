"""Shared e2e fixtures: the real scheduler + worker on free loopback ports (see tests/e2e/stack.py).

  engine_stack        module-scoped running stack (tiny model); use .grpc_addr
  make_engine_stack   factory: make_engine_stack(env={...}, start=True) -> EngineStack, killed at test end
  api_gateway, http   module-scoped gateway process over engine_stack (its URL) and an httpx client of it
  chunked_http        module-scoped httpx client of a gateway over a stack whose prompts are chunked by a 16-token
                      budget with the prefix cache on (prompt logprobs, scoring)
  preempting_stack    module-scoped (gateway URL, scheduler URL) of a stack that preempts (24 KV blocks), chunks every
                      prompt (a 48-token budget) and caches prefixes from 32 tokens (batch invariance, metrics)
  reference           module-scoped (transformers Qwen3_5ForCausalLM with the tiny checkpoint's weights, fp32 as the
                      CPU worker runs, its tokenizer)
"""
import json
import os

import httpx
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


@pytest.fixture(scope="module")
def http(api_gateway):
    """A module-scoped httpx client of api_gateway (a module may define its own, e.g. with Anthropic's headers)."""
    with httpx.Client(base_url=api_gateway, timeout=120) as session:
        yield session


CHUNKED = {"SPARKINFER_MAX_NUM_BATCHED_TOKENS": "16", "SPARKINFER_PREFIX_CACHE": "1",
           "SPARKINFER_PREFIX_CACHE_MIN_TOKENS": "32"}


@pytest.fixture(scope="module")
def chunked_http():
    """Not the shared stack: its scheduler runs a small token budget so every prompt is chunked."""
    _require_model()
    with EngineStack(env=CHUNKED) as stack, running_gateway(stack) as url:
        with httpx.Client(base_url=url, timeout=120) as session:
            yield session


PREEMPTING = {"SPARKINFER_MAX_NUM_BATCHED_TOKENS": "48", "SPARKINFER_PREFIX_CACHE_MIN_TOKENS": "32"}


@pytest.fixture(scope="module")
def preempting_stack():
    """Not the shared stack: a 24-block KV pool (384 tokens) that a few concurrent requests outgrow."""
    _require_model()
    with EngineStack(env=PREEMPTING, worker_env={"SPARKINFER_NUM_KV_BLOCKS": "24"}) as stack:
        with running_gateway(stack) as url:
            yield url, f"http://127.0.0.1:{stack.metrics_port}"


@pytest.fixture(scope="module")
def reference():
    """(transformers' Qwen3_5ForCausalLM with the tiny checkpoint's weights, fp32 like the CPU worker; its
    tokenizer)."""
    transformers = pytest.importorskip("transformers")
    from safetensors.torch import load_file
    with open(os.path.join(DEFAULT_MODEL, "config.json"), encoding="utf-8") as f:
        text_config = json.load(f)["text_config"]
    model = transformers.Qwen3_5ForCausalLM(transformers.Qwen3_5TextConfig(**text_config)).eval().float()
    weights = load_file(os.path.join(DEFAULT_MODEL, "model.safetensors"))
    model.load_state_dict({k.replace("model.language_model.", "model."): v.float() for k, v in weights.items()})
    tokenizer = transformers.AutoTokenizer.from_pretrained(DEFAULT_MODEL)
    return model, tokenizer

