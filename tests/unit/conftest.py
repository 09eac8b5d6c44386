"""Unit-test fixtures shared by the gateway tests."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway


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
