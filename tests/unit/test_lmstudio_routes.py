"""Gateway with the fake scheduler over loopback: LM Studio /api/v0 stop reasons, streamed stats, errors."""
import grpc
import orjson
import pytest


CHAT = {"model": "fake-model", "messages": [{"role": "user", "content": "Hi"}], "enable_thinking": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
# The stats come in the usage chunk, which a stream gets when it asks for it.
USAGE = {"stream_options": {"include_usage": True}}
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"


def events(raw: bytes) -> list:
    out = []
    for line in raw.decode().splitlines():
        if line.startswith("data: "):
            payload = line[len("data: "):]
            out.append(payload if payload == "[DONE]" else orjson.loads(payload))
    return out


@pytest.mark.parametrize("change,reply,finish,reason", [
    ({}, "Hello world", "stop", "eosFound"),
    ({"stop": [" world"]}, "Hello world", "stop", "stopStringFound"),
    ({"max_tokens": 1}, "Hello world", "length", "maxPredictedTokensReached"),
    ({"tools": TOOLS}, CALL, "tool_calls", "toolCalls"),
], ids=["eos", "stop string", "max tokens", "tool calls"])
async def test_stop_reason_streamed_and_not(fake, change, reply, finish, reason):
    client, servicer = fake
    servicer.script.reply = reply
    whole = await (await client.post("/api/v0/chat/completions", json={**CHAT, **change})).json()
    assert whole["choices"][0]["finish_reason"] == finish and whole["stats"]["stop_reason"] == reason
    response = await client.post("/api/v0/chat/completions", json={**CHAT, **change, "stream": True, **USAGE})
    frames = events(await response.read())
    assert frames[-1] == "[DONE]" and frames[-2]["choices"] == []
    assert frames[-2]["stats"]["stop_reason"] == reason
    assert frames[-2]["usage"]["completion_tokens"] == whole["usage"]["completion_tokens"]


async def test_completions_stop_reasons(fake):
    client, servicer = fake
    servicer.script.reply = "Hello world"
    body = {"model": "fake-model", "prompt": "Hi", "max_tokens": 1}
    whole = await (await client.post("/api/v0/completions", json=body)).json()
    assert whole["stats"]["stop_reason"] == "maxPredictedTokensReached" and whole["runtime"]["version"] == "0.1.0"
    frames = events(await (await client.post("/api/v0/completions", json={**body, "stream": True, **USAGE})).read())
    assert frames[-2]["object"] == "text_completion"
    assert frames[-2]["stats"]["stop_reason"] == "maxPredictedTokensReached"


@pytest.mark.parametrize("path,body", [("/api/v0/completions", {"prompt": "Hi"}), ("/api/v0/chat/completions", CHAT)],
                         ids=["completions", "chat"])
async def test_max_tokens_minus_one_is_up_to_the_context(fake, path, body):
    client, servicer = fake
    servicer.script.reply = "Hello world"
    answer = await (await client.post(path, json={**body, "model": "fake-model", "max_tokens": -1})).json()
    assert answer["usage"]["completion_tokens"] >= 2
    sent = servicer.script.requests[-1]
    assert sent.max_tokens == 2048 - answer["usage"]["prompt_tokens"]


async def test_echo_only_completion_is_the_v1_answer(fake):
    client, _ = fake
    body = {"model": "fake-model", "prompt": "Hi", "max_tokens": 0, "echo": True}
    answer = await (await client.post("/api/v0/completions", json=body)).json()
    assert answer["choices"][0]["text"] == "Hi" and answer["usage"]["completion_tokens"] == 0


async def test_overload_is_openai_shaped_429(fake):
    client, servicer = fake
    servicer.script.error = grpc.StatusCode.RESOURCE_EXHAUSTED
    response = await client.post("/api/v0/chat/completions", json=CHAT)
    assert response.status == 429 and response.headers["Retry-After"] == "1"
    assert (await response.json())["error"]["code"] == "server_overloaded"


async def test_bad_request_is_400_with_param(fake):
    client, _ = fake
    response = await client.post("/api/v0/chat/completions", json={**CHAT, "temperature": 9})
    assert response.status == 400 and (await response.json())["error"]["param"] == "temperature"


@pytest.mark.parametrize("path", ["/v1/embeddings", "/api/v0/embeddings"])
async def test_embeddings_are_a_501_with_the_reason_that_sdks_do_not_retry(fake, path):
    """design.md section 3 / release 0.5.6: endpoints the engine does not do answer 501 with a reason, not 404;
    x-should-retry: false keeps the OpenAI SDKs from retrying it."""
    client, _ = fake
    response = await client.post(path, json={"model": "fake-model", "input": "hi"})
    assert response.status == 501 and response.headers["x-should-retry"] == "false"
    assert orjson.loads(await response.read()) == {"error": {
        "message": "This server does not support embeddings. It runs a generative model only",
        "type": "not_implemented", "param": None, "code": "embeddings_unsupported"}}


async def test_model_state_is_not_loaded_while_the_worker_is_down(fake):
    client, servicer = fake
    servicer.worker_alive = False
    listed = orjson.loads(await (await client.get("/api/v0/models")).read())["data"][0]
    one = orjson.loads(await (await client.get("/api/v0/models/fake-model")).read())
    assert listed["state"] == one["state"] == "not-loaded" and "loaded_context_length" not in listed
    servicer.worker_alive = True
    listed = orjson.loads(await (await client.get("/api/v0/models")).read())["data"][0]
    assert listed["state"] == "loaded" and listed["loaded_context_length"] == 2048


async def test_model_list_parses_as_lm_studio_clients_read_it(fake):
    """Zed's LM Studio provider (crates/lmstudio ModelEntry) reads compatibility_type as an enum of gguf and mlx, type
    as llm / embeddings / vlm and state as loaded / loading / not-loaded: any other value fails the whole list."""
    client, _ = fake
    listed = orjson.loads(await (await client.get("/api/v0/models")).read())["data"]
    one = orjson.loads(await (await client.get("/api/v0/models/fake-model")).read())
    for entry in (*listed, one):
        assert entry["compatibility_type"] == "mlx"
        assert entry["type"] in ("llm", "embeddings", "vlm") and entry["state"] in ("loaded", "loading", "not-loaded")
        assert isinstance(entry["publisher"], str) and entry["object"] == "model"


@pytest.mark.parametrize("path,extra", [("/api/v0/chat/completions", {"messages": CHAT["messages"]}),
                                        ("/api/v0/completions", {"prompt": "Hi"})], ids=["chat", "completions"])
async def test_repeat_penalty_is_honoured(fake, path, extra):
    """LM Studio lists repeat_penalty among its supported fields; it was logged as unknown and ignored (the
    scheduler got repetition_penalty 1.0). vLLM's repetition_penalty wins when both are sent."""
    client, servicer = fake
    body = {"model": "fake-model", "max_tokens": 2, "repeat_penalty": 1.3, **extra}
    response = await client.post(path, json=body)
    assert response.status == 200 and orjson.loads(await response.read())["usage"]["completion_tokens"] == 2
    assert servicer.script.requests[-1].sampling.repetition_penalty == pytest.approx(1.3)
    await client.post(path, json={**body, "repetition_penalty": 1.1})
    assert servicer.script.requests[-1].sampling.repetition_penalty == pytest.approx(1.1)


async def test_bad_repeat_penalty_is_a_400_naming_it(fake):
    client, servicer = fake
    response = await client.post("/api/v0/chat/completions", json={**CHAT, "repeat_penalty": 0})
    assert response.status == 400 and not servicer.script.requests
    error = orjson.loads(await response.read())["error"]
    assert error["param"] == "repeat_penalty" and error["message"] == "repeat_penalty must be a number in (0, 10], got 0"


@pytest.mark.parametrize("path, body", [("/api/v0/chat/completions", CHAT),
                                        ("/api/v1/chat", {"model": "fake-model", "input": "Hi"})], ids=["v0", "v1"])
async def test_a_repeat_penalty_of_another_type_is_named_as_json(fake, path, body):
    """The value as the client wrote it (true, "1.1"), not Python's True or '1.1'."""
    client, _ = fake
    for value, shown in ((True, "true"), ("1.1", '"1.1"')):
        response = await client.post(path, json={**body, "repeat_penalty": value})
        message = orjson.loads(await response.read())["error"]["message"]
        assert response.status == 400 and message.endswith(f"must be a number in (0, 10], got {shown}")
