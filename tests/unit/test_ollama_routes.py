"""Gateway with the fake scheduler over loopback: Ollama routes' tool calls, overload and mid-stream errors, options,
roles, tags and show (the generate fields: test_ollama_generate_fields.py)."""
import grpc
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

HI = [{"role": "user", "content": "Hi"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
CALL = ("Let me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")


def lines(raw: bytes) -> list:
    return [orjson.loads(line) for line in raw.splitlines() if line]


async def test_tool_call_streams_whole_in_one_object(fake):
    client, servicer = fake
    servicer.script.reply = CALL
    body = {"model": "fake-model", "messages": HI, "tools": TOOLS, "think": False}
    response = await client.post("/api/chat", json=body)
    assert response.status == 200 and response.content_type == "application/x-ndjson"
    objs = lines(await response.read())
    calls = [o["message"]["tool_calls"] for o in objs if "tool_calls" in o["message"]]
    assert len(calls) == 1 and len(calls[0]) == 1
    assert calls[0][0]["function"] == {"index": 0, "name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
    assert "".join(o["message"]["content"] for o in objs) == "Let me check."
    assert objs[-1]["done"] is True and objs[-1]["done_reason"] == "stop"
    assert "<tool_call>" not in (await response.read()).decode()


async def test_tool_call_not_streamed(fake):
    client, servicer = fake
    servicer.script.reply = CALL
    body = {"model": "fake-model", "messages": HI, "tools": TOOLS, "think": False, "stream": False}
    answer = await (await client.post("/api/chat", json=body)).json()
    assert answer["message"]["content"] == "Let me check."
    assert answer["message"]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris", "days": 3}
    assert answer["done_reason"] == "stop"


@pytest.mark.parametrize("path,body", [
    ("/api/chat", {"model": "fake-model", "messages": HI}),
    ("/api/generate", {"model": "fake-model", "prompt": "Hi", "stream": False}),
], ids=["chat streamed", "generate"])
async def test_full_queue_is_ollamas_503_server_busy(fake, path, body):
    client, servicer = fake
    servicer.script.error = grpc.StatusCode.RESOURCE_EXHAUSTED
    servicer.script.error_details = "queue full: 4 requests waiting"
    response = await client.post(path, json=body)
    assert response.status == 503 and response.headers["Retry-After"] == "1"
    # Ollama's ErrMaxQueue text alone (server/sched.go), as its handleScheduleError writes it; the reason is logged.
    assert await response.json() == {"error": "server busy, please try again.  maximum pending requests exceeded"}


async def test_scheduler_down_is_503(fake):
    client, servicer = fake
    servicer.script.error = grpc.StatusCode.UNAVAILABLE
    servicer.script.error_details = "no worker"
    response = await client.post("/api/generate", json={"model": "fake-model", "prompt": "Hi"})
    assert response.status == 503
    assert "no worker" in (await response.json())["error"]


async def test_failure_mid_stream_is_an_error_line(fake):
    client, servicer = fake
    servicer.script.reply = "Hello world, this is a test."
    servicer.script.abort_after = 3
    response = await client.post("/api/generate", json={"model": "fake-model", "prompt": "Hi", "raw": True})
    assert response.status == 200
    objs = lines(await response.read())
    assert all(o["done"] is False for o in objs[:-1])
    assert set(objs[-1]) == {"error"} and "aborted" in objs[-1]["error"]


async def test_routes_and_methods(fake):
    client, _ = fake
    assert (await client.head("/api/version")).status == 200
    created = await client.post("/api/blobs/sha256:" + "0" * 64, data=b"x")
    assert created.status == 501 and "blobs are not supported" in (await created.json())["error"]
    assert (await client.post("/api/show", json={"name": "fake-model:latest"})).status == 200


@pytest.mark.parametrize("path,extra", [("/api/show", {}), ("/api/generate", {"prompt": "Hi"}),
                                        ("/api/chat", {"messages": HI}), ("/api/chat", {"messages": []})])
async def test_unknown_model_is_ollamas_404_body(fake, path, extra):
    """Ollama's exact body, which clients match to offer a pull; nothing reaches the scheduler."""
    client, servicer = fake
    response = await client.post(path, json={"model": "llama3:8b", "stream": False, **extra})
    assert response.status == 404 and not servicer.script.requests
    assert await response.json() == {"error": "model 'llama3:8b' not found"}


async def test_stop_option_and_length(fake):
    client, servicer = fake
    servicer.script.reply = "Hello world, this is a test."
    body = {"model": "fake-model", "prompt": "Hi", "raw": True, "stream": False, "options": {"stop": [","]}}
    answer = await (await client.post("/api/generate", json=body)).json()
    assert answer["response"] == "Hello world" and answer["done_reason"] == "stop"
    body["options"] = {"num_predict": 2}
    answer = await (await client.post("/api/generate", json=body)).json()
    assert answer["done_reason"] == "length" and answer["eval_count"] == 2
    assert servicer.script.requests[-1].max_tokens == 2


@pytest.mark.parametrize("path,extra", [("/api/generate", {"prompt": "Hi"}), ("/api/chat", {"messages": HI})])
async def test_seed_past_64_bits_is_served_as_ollama_serves_it(fake, path, extra):
    """ComfyUI's seed widget reaches 2^64 - 1; Ollama reads options as a map[string]any and converts the float64 with
    Go's int64(f) (api/types.go Options.FromMap), so it serves such a seed, where this was a 400 'json: cannot
    unmarshal number 18446744073709551658 into Go struct field Options.seed of type int'."""
    client, servicer = fake
    body = {"model": "fake-model", "stream": False, "options": {"seed": 2**64 + 42, "num_predict": 2}, **extra}
    response = await client.post(path, json=body)
    answer = await response.json()
    assert response.status == 200 and answer["done"] is True and answer["eval_count"] == 2
    # Held at int64's top, which llama-server's uint32 reads as 0xFFFFFFFF: a random seed.
    assert servicer.script.requests[-1].sampling.has_seed is False


async def test_the_docs_every_option_example_is_served(fake):
    """docs/api.md 'Generate request (With options)' sets every option Ollama has; typical_p 0.7 made it a 400 ('no
    typical_p sampler'). Each sampling option reaches the scheduler; the load-time ones are accepted and ignored."""
    client, servicer = fake
    options = {"num_keep": 5, "seed": 42, "num_predict": 100, "draft_num_predict": 4, "top_k": 20, "top_p": 0.9,
               "min_p": 0.0, "typical_p": 0.7, "repeat_last_n": 33, "temperature": 0.8, "repeat_penalty": 1.2,
               "presence_penalty": 1.5, "frequency_penalty": 1.0, "penalize_newline": True, "stop": ["\n", "user:"],
               "numa": False, "num_ctx": 1024, "num_batch": 2, "num_gpu": 1, "main_gpu": 0, "use_mmap": True,
               "num_thread": 8}
    body = {"model": "fake-model", "prompt": "Why is the sky blue?", "stream": False, "options": options}
    answer = await (await client.post("/api/generate", json=body)).json()
    assert answer["done"] is True and answer["response"] is not None and answer["eval_count"] > 0
    request = servicer.script.requests[-1]
    s = request.sampling
    assert (s.typical_p, s.top_p, s.temperature, s.repetition_penalty) == pytest.approx((0.7, 0.9, 0.8, 1.2))
    assert (s.top_k, s.seed, s.repetition_window, request.max_tokens) == (20, 42, 33, 100)
    assert (s.presence_penalty, s.frequency_penalty) == pytest.approx((1.5, 1.0))


async def test_top_p_0_is_served_as_ollama_serves_it(fake):
    client, servicer = fake
    body = {"model": "fake-model", "messages": HI, "stream": False, "options": {"top_p": 0, "num_predict": 2}}
    answer = await (await client.post("/api/chat", json=body)).json()
    assert answer["done"] is True and answer["eval_count"] == 2
    assert servicer.script.requests[-1].sampling.top_p == pytest.approx(1e-9)


@pytest.mark.parametrize("path,body", [
    ("/api/generate", {"model": "fake-model", "prompt": "Hi", "stream": False}),
    ("/api/chat", {"model": "fake-model", "messages": HI, "stream": False}),
], ids=["generate", "chat"])
async def test_a_repeat_last_n_past_int32_is_the_whole_context(fake, path, body):
    """Ollama takes any Go int for repeat_last_n; 2^31 reached the wire's int32 repetition_window and was a 500
    ({"error": "gateway error while generating: ValueError('Value out of range: 2147483648')"}). A window at or
    past the context looks back over all of it, as -1 does."""
    client, servicer = fake
    servicer.script.reply = "Hello"
    response = await client.post(path, json={**body, "think": False,
                                             "options": {"repeat_last_n": 2**31, "repeat_penalty": 1.2}})
    answer = await response.json()
    assert response.status == 200, answer
    assert answer["done"] is True and "error" not in answer
    assert (answer["response"] if path == "/api/generate" else answer["message"]["content"]) == "Hello"
    assert servicer.script.requests[-1].sampling.repetition_window == 0


async def test_roles_are_read_in_any_case_as_ollama_reads_them(fake):
    """Ollama's Message.UnmarshalJSON lower-cases the role; "User" was a 400 'messages[0].role must be one of ...'."""
    client, servicer = fake
    servicer.script.reply = "Hello"
    messages = [{"role": "System", "content": "Be brief."}, {"role": "USER", "content": "Weather?"},
                {"role": "Assistant", "content": "", "tool_calls": [
                    {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                {"role": "Tool", "tool_name": "get_weather", "content": "sunny"}]
    body = {"model": "fake-model", "messages": messages, "tools": TOOLS, "think": False, "stream": False}
    response = await client.post("/api/chat", json=body)
    answer = await response.json()
    assert response.status == 200, answer
    assert answer["message"] == {"role": "assistant", "content": "Hello"} and answer["done_reason"] == "stop"
    prompt = servicer.tokenizer.decode(list(servicer.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
    assert prompt.startswith("<|im_start|>system\n") and "Be brief." in prompt
    assert "<|im_start|>user\nWeather?<|im_end|>" in prompt
    assert "<function=get_weather>" in prompt and "<tool_response>\nsunny\n</tool_response>" in prompt


async def test_tags_and_show_as_ollama_writes_them():
    """/api/tags lists each model's capabilities and details.context_length (Ollama >= 0.30; this server says it is
    0.33.3), and /api/show's parameters are Ollama's lines: option names, values padded to column 31, no newline
    after the last. They were missing, and "repetition_penalty 1.05\\ntemperature 0.7\\n"."""
    servicer = FakeServing(build_tokenizer(), max_context_len=2048)
    servicer.generation_config = '{"temperature": 0.7, "top_k": 20, "repetition_penalty": 1.0}'
    async with fake_gateway(servicer) as (client, _):
        tags = await (await client.get("/api/tags")).json()
        show = await (await client.post("/api/show", json={"model": "fake-model"})).json()
    (entry,) = tags["models"]
    assert entry["capabilities"] == ["completion", "tools", "thinking"]
    assert entry["details"]["context_length"] == 2048 and entry["details"]["family"] == "qwen3_5"
    assert show["parameters"] == "\n".join(["num_ctx                        2048", "repeat_penalty                 1",
                                            "temperature                    0.7", "top_k                          20"])
    assert show["capabilities"] == entry["capabilities"]


@pytest.mark.parametrize("path,body,key", [
    ("/api/chat", {"messages": [{"role": "system", "content": "Be brief."}, *HI], "think": False}, "message"),
    ("/api/generate", {"prompt": "Hi", "system": "Be brief.", "think": False}, "response"),
    ("/api/generate", {"prompt": "Hi", "raw": True}, "response"),
], ids=["chat", "generate", "generate raw"])
async def test_debug_render_only_answers_the_prompt_and_generates_nothing(fake, path, body, key):
    """Ollama's `_debug_render_only` (server/routes.go): the rendered prompt in `_debug_info`, one object, no
    generation, whether or not the request streams."""
    client, servicer = fake
    response = await client.post(path, json={"model": "fake-model", "_debug_render_only": True, **body})
    assert response.status == 200 and response.content_type == "application/json"
    answer = await response.json()
    rendered = answer.pop("_debug_info")["rendered_template"]
    assert {k: v for k, v in answer.items() if k != "created_at"} == {
        "model": "fake-model", key: {"role": "", "content": ""} if key == "message" else "", "done": False}
    if body.get("raw"):
        assert rendered == "Hi"
    else:
        assert rendered.startswith("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n")
        assert rendered.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert servicer.script.requests == []
    bad = await client.post(path, json={"model": "fake-model", "_debug_render_only": "yes", **body})
    struct = "GenerateRequest" if path == "/api/generate" else "ChatRequest"
    assert bad.status == 400 and await bad.json() == {
        "error": f"json: cannot unmarshal string into Go struct field {struct}._debug_render_only of type bool"}
