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


@pytest.mark.parametrize("path, body", [
    ("/api/chat", {"messages": [], "tools": TOOLS, "think": True}),
    ("/api/chat", {"messages": [], "format": "yaml", "options": {"num_ctx": "big"}}),
    ("/api/generate", {"prompt": "", "raw": True, "system": "x", "think": "high"}),
    ("/api/generate", {"suffix": "x", "format": [], "options": {"temperature": "hot"}}),
], ids=["chat tools and think", "chat format and options", "generate raw and think", "generate suffix and format"])
async def test_an_unload_is_answered_before_the_rest_is_read(plain, path, body):
    """Ollama's handlers unload (keep_alive 0, nothing to generate) as soon as the model is found, before they check
    think, tools, raw, the format or the options (server/routes.go ChatHandler, GenerateHandler); a load without
    keep_alive 0 still gets those checks (the 400s above)."""
    client, servicer = plain
    response = await client.post(path, json={"model": "fake-model", "keep_alive": 0, **body})
    assert response.status == 200 and not servicer.script.requests
    answer = await response.json()
    assert answer["done"] is True and answer["done_reason"] == "unload"


@pytest.mark.parametrize("body, status, error", [
    ({"model": "nope", "keep_alive": 0}, 404, "model 'nope' not found"),
    ({"model": "fake-model", "keep_alive": "0x"}, 400, 'time: unknown unit "x" in duration "0x"'),
    ({"model": "fake-model", "keep_alive": 0, "think": "none"},
     400, 'invalid think value: "none" (must be "high", "medium", "low", "max", true, or false)'),
], ids=["unknown model", "bad keep_alive", "bad think value"])
async def test_what_ollama_reads_before_an_unload_still_refuses_it(plain, body, status, error):
    client, _ = plain
    response = await client.post("/api/chat", json={"messages": [], **body})
    assert response.status == status and await response.json() == {"error": error}


@pytest.mark.parametrize("path, body", [
    ("/api/chat", {"messages": [], "format": "yaml"}),
    ("/api/chat", {"format": {"type": "nonsense"}, "think": False}),
    ("/api/generate", {"prompt": "", "format": []}),
    ("/api/generate", {"images": ["aGk="], "think": False}),
    ("/api/generate", {"context": [10 ** 9]}),
], ids=["chat format", "chat schema", "generate format", "generate images", "generate context"])
async def test_a_load_reads_no_format_images_or_context(plain, path, body):
    """A load (no messages, no prompt) is answered once the model is scheduled: Ollama's handlers read the format
    (llm/llama_server.go, at completion), the images and the context only for a prompt (server/routes.go
    GenerateHandler, ChatHandler), so a preload built from a request's other fields loads; here they were 400s."""
    client, servicer = plain
    response = await client.post(path, json={"model": "fake-model", **body})
    assert response.status == 200 and not servicer.script.requests
    answer = await response.json()
    assert answer["done"] is True and answer["done_reason"] == "load"
