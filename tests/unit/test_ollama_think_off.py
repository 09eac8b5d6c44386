"""Ollama `think: false` (fake scheduler): a <think> block the model still writes stays in the answer, as Ollama
leaves it (its thinking parser is built only when thinking is on)."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

HI = [{"role": "user", "content": "Hi"}]
REPLY = "<think>\nplan it\n</think>\n\nHello world"


@pytest.fixture
async def fake():
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=2048)) as pair:
        yield pair


def _objects(raw: bytes) -> list:
    return [orjson.loads(line) for line in raw.splitlines() if line]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("path, body, text", [("/api/chat", {"messages": HI}, lambda o: o["message"]["content"]),
                                              ("/api/generate", {"prompt": "Hi"}, lambda o: o["response"])],
                         ids=["chat", "generate"])
async def test_think_false_leaves_a_think_block_in_the_answer(fake, path, body, text, stream):
    client, servicer = fake
    servicer.script.reply = REPLY
    response = await client.post(path, json={"model": "fake-model", "think": False, "stream": stream, **body})
    objects = _objects(await response.read())
    assert response.status == 200 and objects[-1]["done"] is True
    assert "".join(text(o) for o in objects) == REPLY
    assert not any("thinking" in o or "thinking" in o.get("message", {}) for o in objects)


@pytest.mark.parametrize("think", [None, True, "high"], ids=["absent", "true", "effort"])
async def test_thinking_on_still_splits_the_block(fake, think):
    client, servicer = fake
    servicer.script.reply = "plan it\n</think>\n\nHello world"
    body = {"model": "fake-model", "messages": HI, "stream": False, **({} if think is None else {"think": think})}
    answer = await (await client.post("/api/chat", json=body)).json()
    assert answer["message"] == {"role": "assistant", "content": "Hello world", "thinking": "plan it"}
