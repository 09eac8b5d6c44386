"""A model whose chat template has neither tools nor a thinking mode (fake scheduler): Ollama's 400s for tools and
think on it, in its words, and a <think> block it writes stays in the answer (Ollama parses thinking only on a model
with the thinking capability)."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

PLAIN = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
         "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
HI = [{"role": "user", "content": "Hi"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


@pytest.fixture
async def plain():
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=2048, template=PLAIN)) as pair:
        yield pair


@pytest.mark.parametrize("path, body, error", [
    ("/api/chat", {"messages": HI, "tools": TOOLS}, "registry.ollama.ai/library/fake-model:latest does not support tools"),
    ("/api/chat", {"messages": [], "tools": TOOLS}, "registry.ollama.ai/library/fake-model:latest does not support tools"),
    ("/api/chat", {"messages": HI, "think": True}, '"fake-model" does not support thinking'),
    ("/api/chat", {"messages": HI, "think": "high", "tools": TOOLS}, '"fake-model" does not support thinking'),
    ("/api/generate", {"prompt": "Hi", "think": True}, '"fake-model" does not support thinking'),
    ("/api/generate", {"prompt": "", "think": "low"}, '"fake-model" does not support thinking'),
    ("/api/generate", {"prompt": "Hi", "raw": True, "think": True}, '"fake-model" does not support thinking'),
], ids=["tools", "tools on a load", "think", "think before tools", "generate think", "generate load", "raw"])
async def test_what_the_model_lacks_is_ollamas_400(plain, path, body, error):
    client, servicer = plain
    response = await client.post(path, json={"model": "fake-model", "stream": False, **body})
    assert response.status == 400 and await response.json() == {"error": error}
    assert servicer.script.requests == []


@pytest.mark.parametrize("path, body, text", [
    ("/api/chat", {"messages": HI}, lambda answer: answer["message"]),
    ("/api/chat", {"messages": HI, "think": False}, lambda answer: answer["message"]),
    ("/api/generate", {"prompt": "Hi"}, lambda answer: {"role": "assistant", "content": answer["response"],
                                                        **({"thinking": answer["thinking"]} if "thinking" in answer
                                                           else {})}),
], ids=["chat", "chat think false", "generate"])
async def test_a_think_block_stays_in_the_answer_of_a_model_that_does_not_think(plain, path, body, text):
    client, servicer = plain
    servicer.script.reply = "<think>\nhm\n</think>\n\nHello world"
    answer = await (await client.post(path, json={"model": "fake-model", "stream": False, **body})).json()
    assert text(answer) == {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHello world"}


async def test_show_lists_neither_capability(plain):
    client, _ = plain
    show = await (await client.post("/api/show", json={"model": "fake-model"})).json()
    assert show["capabilities"] == ["completion"]
