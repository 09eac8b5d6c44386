"""Gateway with the fake scheduler over loopback: Ollama's /api/generate fields (raw with think, context, suffix,
num_predict, num_ctx, logprobs) and where a generate answer's context ends."""
import orjson
import pytest

HI = [{"role": "user", "content": "Hi"}]


def lines(raw: bytes) -> list:
    return [orjson.loads(line) for line in raw.splitlines() if line]


@pytest.mark.parametrize("think, response, thinking", [
    (True, "Hello world", "Let me think.\n"),
    (False, "<think>\nLet me think.\n</think>\n\nHello world", None),
], ids=["think on", "think off"])
async def test_raw_generate_with_think(fake, think, response, thinking):
    """raw: true with think (Ollama accepts it; a 400 before): on, the raw answer's <think> block is `thinking`."""
    client, servicer = fake
    servicer.script.reply = "<think>\nLet me think.\n</think>\n\nHello world"
    body = {"model": "fake-model", "prompt": "Hi", "raw": True, "think": think, "system": "", "stream": False}
    answer = await (await client.post("/api/generate", json=body)).json()
    assert answer["response"] == response and answer.get("thinking") == thinking and answer["done"] is True
    # Ollama's docs: raw mode will not return a context (it sent the templated ids of nothing it rendered).
    assert "context" not in answer and answer["eval_count"] > 0


async def test_raw_generate_with_a_context_is_ollamas_400(fake):
    client, servicer = fake
    body = {"model": "fake-model", "prompt": "Hi", "raw": True, "context": [5, 6], "stream": False}
    response = await client.post("/api/generate", json=body)
    assert response.status == 400 and not servicer.script.requests
    assert await response.json() == {"error": "raw mode does not support template, system, or context"}


async def test_logprobs_as_ollama_sends_them(fake):
    """top_logprobs alone is ignored (a 400 before), and with logprobs: true but no alternatives asked for, each entry
    has no top_logprobs key (Ollama's omitempty; it was an empty list)."""
    client, servicer = fake
    body = {"model": "fake-model", "messages": HI, "think": False, "stream": False, "top_logprobs": 3}
    answer = await (await client.post("/api/chat", json=body)).json()
    assert answer["done"] is True and answer["message"]["content"] and "logprobs" not in answer
    answer = await (await client.post("/api/chat", json={**body, "logprobs": True, "top_logprobs": 0})).json()
    assert answer["logprobs"] and all(set(entry) == {"token", "logprob", "bytes"} for entry in answer["logprobs"])
    response = await client.post("/api/chat", json={**body, "top_logprobs": 21})
    assert response.status == 400 and await response.json() == {"error": "top_logprobs must be between 0 and 20"}


async def test_fractional_num_predict_is_read_as_ollama_reads_it(fake):
    """Ollama truncates a fractional integer option (Go's int64(f)); {"num_predict": 2.5} was a 400 here."""
    client, servicer = fake
    body = {"model": "fake-model", "prompt": "Hi", "raw": True, "stream": False, "options": {"num_predict": 2.5}}
    answer = await (await client.post("/api/generate", json=body)).json()
    assert answer["done_reason"] == "length" and answer["eval_count"] == 2
    response = await client.post("/api/generate", json={**body, "options": {"temperature": "0.5"}})
    assert response.status == 400 and await response.json() == {"error": 'option "temperature" must be of type float32'}


async def test_suffix_is_ollamas_capability_400(fake):
    """A model without a fill-in-the-middle template: Ollama's 'does not support insert' (it was other words)."""
    client, servicer = fake
    body = {"model": "fake-model", "prompt": "def f(", "suffix": "    return 1", "stream": False}
    response = await client.post("/api/generate", json=body)
    assert response.status == 400 and not servicer.script.requests
    assert await response.json() == {"error": "registry.ollama.ai/library/fake-model:latest does not support insert"}


async def test_num_ctx_0_is_the_default_window(fake):
    client, servicer = fake
    body = {"model": "fake-model", "messages": HI, "stream": False, "options": {"num_ctx": 0, "num_predict": 2}}
    answer = await (await client.post("/api/chat", json=body)).json()
    assert answer["done"] is True and answer["done_reason"] == "length" and answer["eval_count"] == 2


async def test_empty_prompt_with_a_context_is_a_load(fake):
    client, servicer = fake
    body = {"model": "fake-model", "prompt": "", "context": [5, 6], "stream": False}
    answer = await (await client.post("/api/generate", json=body)).json()
    assert not servicer.script.requests and set(answer) == {"model", "created_at", "response", "done", "done_reason"}
    assert answer["response"] == "" and answer["done"] is True and answer["done_reason"] == "load"


@pytest.mark.parametrize("stop,kept", [(", this", "Hello world"), ("orld", "Hello w"), ("Hello", "")],
                         ids=["at-a-token", "mid-token", "at-once"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_generate_context_ends_where_the_answer_ends(fake, stop, kept, stream):
    """Ollama's context is the prompt and the generated text with the stop string left out (it tokenizes
    prompt + response); it held the stop string's tokens too, so a continuation from it went on after text the
    client never saw ("Hello world" answered, context ending "Hello world, this")."""
    client, servicer = fake
    servicer.script.reply = "Hello world, this is a test."
    body = {"model": "fake-model", "prompt": "Hi", "think": False, "stream": stream, "options": {"stop": [stop]}}
    response = await client.post("/api/generate", json=body)
    objs = lines(await response.read())
    final = objs[-1]
    assert final["done"] is True and final["done_reason"] == "stop"
    assert "".join(o["response"] for o in objs) == kept
    prompt = list(servicer.script.requests[-1].prompt_token_ids)
    assert final["context"][:len(prompt)] == prompt
    assert servicer.tokenizer.decode(final["context"][len(prompt):]) == kept


@pytest.mark.parametrize("parameters", [{"type": "object", "properties": None},
                                        {"type": "object", "properties": {"tz": {"type": "string", "enum": None}},
                                         "required": None}], ids=["properties-null", "required-and-enum-null"])
async def test_null_members_of_a_tool_are_absent_as_ollama_reads_them(fake, parameters):
    """Ollama's Go structs read a null as the field's zero value, and its own Go client sends a tool without
    parameters as {"type": "object", "properties": null}; with `format` (whose grammar checks the tools' schemas)
    that was a 400 "tools[0].function.parameters is not a valid JSON Schema: None is not of type 'object'"."""
    client, servicer = fake
    servicer.script.reply = '{"time": "noon"}'
    tools = [{"type": "function", "function": {"name": "get_time", "description": None, "parameters": parameters}}]
    body = {"model": "fake-model", "messages": HI, "tools": tools, "format": "json", "think": False, "stream": False}
    response = await client.post("/api/chat", json=body)
    answer = await response.json()
    assert response.status == 200, answer
    assert answer["message"] == {"role": "assistant", "content": '{"time": "noon"}'} and answer["done"] is True
    request = servicer.script.requests[-1]
    assert request.constraint.kind == "lark" and "get_time" in request.constraint.grammar
    prompt = servicer.tokenizer.decode(list(request.prompt_token_ids), skip_special_tokens=False)
    assert "get_time" in prompt and "null" not in prompt


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_generate_context_with_thinking_ends_at_the_stop(fake, stream):
    """A stop string ends the output wherever it appears, inside the thinking too (Ollama's runner matches stop
    strings over the raw output; test_ollama_stop_in_thinking.py): context is the prompt and the raw text up to the
    stop, as server/routes.go GenerateHandler tokenizes prompt + the runner's content."""
    client, servicer = fake
    servicer.script.reply = "I say STOP inside.\n</think>\n\nAnswer STOP here."
    body = {"model": "fake-model", "prompt": "Hi", "stream": stream, "options": {"stop": ["STOP"]}}
    objs = lines(await (await client.post("/api/generate", json=body)).read())
    assert "".join(o["response"] for o in objs) == ""
    assert "".join(o.get("thinking", "") for o in objs).rstrip() == "I say"
    final = objs[-1]
    prompt = list(servicer.script.requests[-1].prompt_token_ids)
    assert final["context"][:len(prompt)] == prompt
    assert servicer.tokenizer.decode(final["context"][len(prompt):]) == "I say "
