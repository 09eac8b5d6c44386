"""LM Studio 0.4's /api/v1 (fake scheduler): the model list, chat (streamed as named SSE events, and not), errors in
its error object; 404 before (Ollama's "404 page not found")."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

THOUGHT = "plan it\n</think>\n\nHello world"


def named_events(raw: bytes) -> list:
    """(event name, data) of each SSE event; the name must match the data's type."""
    out = []
    for block in raw.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        if lines:
            data = orjson.loads(lines["data"])
            assert lines["event"] == data["type"]
            out.append(data)
    return out


async def test_models_lists_the_served_model(fake):
    client, _ = fake
    body = await (await client.get("/api/v1/models")).json()
    assert body == {"models": [{
        "type": "llm", "publisher": "sparkinfer", "key": "fake-model", "display_name": "fake-model",
        "architecture": "qwen3_5", "quantization": {"name": "BF16", "bits_per_weight": 16}, "size_bytes": 2000,
        "params_string": "1K", "loaded_instances": [{"id": "fake-model", "config": {
            "context_length": 2048, "offload_kv_cache_to_gpu": True, "parallel": 64}}],
        "max_context_length": 2048, "format": None, "description": None,
        "capabilities": {"vision": False, "trained_for_tool_use": True,
                         "reasoning": {"allowed_options": ["off", "on", "low", "medium", "high"], "default": "on"}}}]}


async def test_chat_answer_has_reasoning_then_message_and_stats(fake):
    client, servicer = fake
    servicer.script.reply = THOUGHT
    body = {"model": "fake-model", "input": "Hi", "system_prompt": "Be brief.", "temperature": 0.2,
            "max_output_tokens": 50, "repeat_penalty": 1.1}
    response = await client.post("/api/v1/chat", json=body)
    answer = await response.json()
    assert response.status == 200
    assert answer["model_instance_id"] == "fake-model" and answer["response_id"].startswith("resp_")
    assert answer["output"] == [{"type": "reasoning", "content": "plan it\n"},
                                {"type": "message", "content": "Hello world"}]
    stats = answer["stats"]
    assert stats["total_output_tokens"] == len(servicer.tokenizer.encode(THOUGHT).ids) + 1
    assert 0 < stats["reasoning_output_tokens"] < stats["total_output_tokens"] and stats["input_tokens"] > 0
    request = servicer.script.requests[0]
    assert request.max_tokens == 50 and abs(request.sampling.temperature - 0.2) < 1e-6
    assert abs(request.sampling.repetition_penalty - 1.1) < 1e-6
    prompt = servicer.tokenizer.decode(list(request.prompt_token_ids), skip_special_tokens=False)
    assert "Be brief." in prompt and prompt.rstrip().endswith("<think>")


async def test_chat_streams_named_events_ending_with_the_result(fake):
    client, servicer = fake
    servicer.script.reply = THOUGHT
    response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": [
        {"type": "message", "content": "Hi"}], "stream": True})
    assert response.status == 200 and response.content_type == "text/event-stream"
    events = named_events(await response.read())
    kinds = [e["type"] for e in events]
    assert kinds[:3] == ["chat.start", "prompt_processing.start", "prompt_processing.end"]
    assert kinds[3] == "reasoning.start" and kinds[-3:] == ["message.delta", "message.end", "chat.end"]
    assert kinds.index("reasoning.end") < kinds.index("message.start")
    assert "".join(e["content"] for e in events if e["type"] == "reasoning.delta") == "plan it\n"
    assert "".join(e["content"] for e in events if e["type"] == "message.delta") == "Hello world"
    assert events[-1]["result"]["output"] == [{"type": "reasoning", "content": "plan it\n"},
                                              {"type": "message", "content": "Hello world"}]


async def test_reasoning_off_closes_the_thinking_in_the_prompt(fake):
    client, servicer = fake
    answer = await (await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Hi",
                                                            "reasoning": "off"})).json()
    assert answer["output"] == [{"type": "message", "content": "Hello world"}]
    prompt = servicer.tokenizer.decode(list(servicer.script.requests[0].prompt_token_ids), skip_special_tokens=False)
    assert prompt.rstrip().endswith("</think>")


@pytest.mark.parametrize("body, status, param, words", [
    ({"input": "Hi"}, 400, "model", '"model" is required'),
    ({"model": "fake-model"}, 400, "input", '"input" is required'),
    ({"model": "fake-model", "input": [{"type": "image", "data_url": "data:image/png;base64,AA=="}]}, 400,
     "input[0]", "image input is not supported"),
    ({"model": "fake-model", "input": "Hi", "previous_response_id": "resp_1"}, 400, "previous_response_id",
     "not found"),
    ({"model": "fake-model", "input": "Hi", "integrations": ["mcp/playwright"]}, 400, "integrations",
     "not supported"),
    ({"model": "fake-model", "input": "Hi", "reasoning": "max"}, 400, "reasoning", "must be one of"),
    ({"model": "fake-model", "input": "Hi", "reasoning": ["on"]}, 400, "reasoning", "must be one of"),
    ({"model": "fake-model", "input": "Hi", "max_output_tokens": 0}, 400, "max_output_tokens", "positive"),
    ({"model": "other", "input": "Hi"}, 404, "model", "does not exist"),
], ids=["no model", "no input", "image", "previous response", "integrations", "reasoning", "reasoning not a string",
        "max tokens", "model"])
async def test_bad_chat_is_an_error_object(fake, body, status, param, words):
    client, _ = fake
    response = await client.post("/api/v1/chat", json=body)
    error = (await response.json())["error"]
    assert response.status == status and error["param"] == param and words in error["message"]


async def test_loading_or_downloading_the_served_model_answers_as_lm_studio_does_for_a_model_it_has(fake):
    """LM Studio's load of a model in memory and download of a model it has (docs developer/rest load, download);
    both were a 501, so a client that loads or downloads the model before its chat stopped there."""
    client, servicer = fake
    response = await client.post("/api/v1/models/load", json={"model": "fake-model", "context_length": 4096})
    assert response.status == 200 and await response.json() == {
        "type": "llm", "instance_id": "fake-model", "load_time_seconds": 0.0, "status": "loaded"}
    response = await client.post("/api/v1/models/load", json={"model": "default", "echo_load_config": True})
    assert (await response.json())["load_config"] == {"context_length": 2048, "offload_kv_cache_to_gpu": True}
    response = await client.post("/api/v1/models/download", json={"model": "fake-model", "quantization": "Q4_K_M"})
    assert response.status == 200 and await response.json() == {"status": "already_downloaded"}
    assert not servicer.script.requests


async def test_loading_the_served_model_without_a_worker_is_a_503(fake):
    client, servicer = fake
    servicer.worker_alive = False
    response = await client.post("/api/v1/models/load", json={"model": "fake-model"})
    assert response.status == 503 and "no live worker" in (await response.json())["error"]["message"]


@pytest.mark.parametrize("path,body,status,param,words", [
    ("/api/v1/models/load", {"model": "qwen/qwen3-4b"}, 404, "model", "The model 'qwen/qwen3-4b' does not exist"),
    ("/api/v1/models/load", {}, 400, "model", '"model" is required'),
    ("/api/v1/models/load", {"model": "fake-model", "ttl": 60}, 400, "ttl", "Unrecognized key(s) in object: 'ttl'"),
    ("/api/v1/models/load", {"model": "fake-model", "echo_load_config": "yes"}, 400, "echo_load_config",
     '"echo_load_config" must be a boolean'),
    ("/api/v1/models/load", {"model": "fake-model", "context_length": -5}, 400, "context_length",
     '"context_length" must be a positive integer'),
    ("/api/v1/models/load", {"model": "fake-model", "eval_batch_size": 1.5}, 400, "eval_batch_size",
     '"eval_batch_size" must be a positive integer'),
    ("/api/v1/models/load", {"model": "fake-model", "flash_attention": "on"}, 400, "flash_attention",
     '"flash_attention" must be a boolean'),
    ("/api/v1/models/download", {"model": "qwen/qwen3-4b"}, 501, "model", "downloading models is not supported"),
    ("/api/v1/models/unload", {"instance_id": "qwen/qwen3-4b"}, 404, "model",
     "The model 'qwen/qwen3-4b' does not exist"),
    ("/api/v1/models/unload", {}, 400, "instance_id", '"instance_id" is required'),
    ("/api/v1/models/unload", {"instance_id": "fake-model", "model": "fake-model"}, 400, "model",
     "Unrecognized key(s) in object: 'model'"),
], ids=["load another model", "load no model", "load unknown key", "echo not a boolean", "negative context",
        "fractional batch", "flash attention not a boolean", "download another model", "unload another instance",
        "unload no instance", "unload unknown key"])
async def test_other_model_management_is_an_error_object(fake, path, body, status, param, words):
    client, _ = fake
    response = await client.post(path, json=body)
    error = (await response.json())["error"]
    assert response.status == status and error["param"] == param and error["message"].startswith(words)


async def test_failure_mid_stream_is_an_error_event_then_chat_end(fake):
    client, servicer = fake
    servicer.script.reply, servicer.script.abort_after = "Hello world again", 2
    response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Hi", "stream": True,
                                                       "reasoning": "off"})
    events = named_events(await response.read())
    assert [e["type"] for e in events[-3:]] == ["message.end", "error", "chat.end"]
    assert events[-2]["error"]["message"] and set(events[-2]["error"]) == {"type", "message", "code", "param"}
    sent = "".join(e["content"] for e in events if e["type"] == "message.delta")
    assert sent and events[-1]["result"]["output"] == [{"type": "message", "content": sent}]


async def test_context_length_is_the_window_the_chat_runs_in(fake):
    """LM Studio's context_length: a prompt that does not fit is its 400 ("The number of tokens to keep from the
    initial prompt is greater than the context length"), and the output stops where the window is full."""
    client, servicer = fake
    response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Hi", "context_length": 5})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "context_length"
    assert error["message"].startswith("The number of tokens to keep from the initial prompt is greater than the "
                                       "context length (n_keep: ")
    assert error["message"].endswith(">= n_ctx: 5). Try to load the model with a larger context length, or provide "
                                     "a shorter input.")
    assert servicer.script.requests == []
    servicer.script.reply = "a b c d e f g h i j k l m n o p"
    body = {"model": "fake-model", "input": "Hi", "reasoning": "off", "context_length": 40}
    answer = await (await client.post("/api/v1/chat", json=body)).json()
    request = servicer.script.requests[-1]
    assert request.max_tokens == 40 - len(request.prompt_token_ids)
    assert answer["stats"]["input_tokens"] + answer["stats"]["total_output_tokens"] == 40
    # Larger than the model's: the model's window.
    await client.post("/api/v1/chat", json={**body, "context_length": 10**6})
    request = servicer.script.requests[-1]
    assert request.max_tokens == 2048 - len(request.prompt_token_ids)


async def test_reasoning_on_a_model_without_it_is_lm_studios_400():
    """LM Studio: "Will error if the model being used does not support the reasoning setting"; for a model without a
    reasoning mode, whatever the setting: "Model '<model>' does not expose reasoning configuration." It was ignored."""
    plain = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
             "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=2048, template=plain)) as (client, servicer):
        for reasoning in ("on", "off", "high"):
            body = {"model": "fake-model", "input": "Hi", "reasoning": reasoning}
            response = await client.post("/api/v1/chat", json=body)
            assert response.status == 400 and (await response.json())["error"] == {
                "message": "Model 'fake-model' does not expose reasoning configuration.",
                "type": "invalid_request", "param": "reasoning", "code": "invalid_value"}
        assert servicer.script.requests == []
        answer = await (await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Hi"})).json()
        assert answer["output"] == [{"type": "message", "content": "Hello world"}]


@pytest.mark.parametrize("switches, allowed, refused", [
    ("{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}", ["off", "on"],
     "low"),
    ("<think>\n", ["on"], "off"),
], ids=["enable_thinking only", "always thinks"])
async def test_a_reasoning_setting_the_template_cannot_honour_is_lm_studios_400(switches, allowed, refused):
    """LM Studio lists the settings a model takes (capabilities.reasoning.allowed_options) and refuses another with
    "Reasoning setting 'x' is not supported by model 'm'. Supported settings: ..."; "low" on a template without
    reasoning_effort was plain thinking, "off" on one that always thinks still thought."""
    template = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n" + switches + "{% endif %}")
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=2048, template=template)) as pair:
        client, servicer = pair
        entry = (await (await client.get("/api/v1/models")).json())["models"][0]
        assert entry["capabilities"]["reasoning"] == {"allowed_options": allowed, "default": "on"}
        response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Hi", "reasoning": refused})
        assert response.status == 400 and (await response.json())["error"] == {
            "message": f"Reasoning setting '{refused}' is not supported by model 'fake-model'. Supported settings: "
                       f"{', '.join(repr(option) for option in allowed)}.",
            "type": "invalid_request", "param": "reasoning", "code": "invalid_value"}
        assert servicer.script.requests == []
        for setting in allowed:
            body = {"model": "fake-model", "input": "Hi", "reasoning": setting}
            assert (await client.post("/api/v1/chat", json=body)).status == 200


async def test_an_answer_without_text_still_ends_prompt_processing(fake):
    """LM Studio's stream (streaming-events) opens prompt_processing.start and ends it with prompt_processing.end
    before chat.end; an output with no text (the model ended at once) skipped the end."""
    client, servicer = fake
    servicer.script.reply = ""
    response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Hi", "stream": True,
                                                        "reasoning": "off"})
    events = named_events(await response.read())
    assert [e["type"] for e in events] == ["chat.start", "prompt_processing.start", "prompt_processing.end",
                                           "chat.end"]
    assert events[-1]["result"]["output"] == [{"type": "message", "content": ""}]
