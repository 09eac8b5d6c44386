"""Unit-test fixtures shared by the gateway tests."""
import os

import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

TINY_TOKENIZER = os.path.join(os.path.dirname(__file__), "..", "..", "models", "tiny", "tokenizer.json")


@pytest.fixture
async def stack(request):
    """(aiohttp TestClient, FakeServing): the real gateway over a fake scheduler that answers the test module's REPLY
    ("Hello world" without one), context 2048. A test module that needs another setup defines its own `stack`."""
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    fake.script.reply = getattr(request.module, "REPLY", "Hello world")
    async with fake_gateway(fake) as pair:
        yield pair


@pytest.fixture
def fake(stack):
    """`stack` under the name the Ollama, LM Studio and robustness test modules use (they set their replies
    themselves). A module that needs another setup defines its own `fake`."""
    return stack


@pytest.fixture
async def grammar_stack():
    """(aiohttp TestClient, FakeServing, GrammarBook): the real gateway over a fake scheduler with the tiny model's
    tokenizer (context 4096) and a grammar book over it, to read back the constraint a request sent."""
    from tokenizers import Tokenizer

    from worker.grammar import GrammarBook

    with open(TINY_TOKENIZER) as f:
        text = f.read()
    fake = FakeServing(Tokenizer.from_str(text), max_context_len=4096)
    async with fake_gateway(fake) as (client, fake):
        yield client, fake, GrammarBook(text, 1024, [fake.eos_id])
