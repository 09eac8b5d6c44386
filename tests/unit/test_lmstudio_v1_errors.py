"""LM Studio 0.4's /api/v1/chat (and /api/v0's, for a prompt past the context; fake scheduler): its errors name its own fields (`input`, `max_output_tokens`), never
the /v1/chat/completions ones the body is translated into, and a stream's error event has LM Studio's types."""
import orjson
import pytest

from gateway.errors import InternalError, InvalidRequest, NotFound, NotImplementedApi, Unavailable
from gateway.lmstudio_v1_shape import event_error_type


@pytest.mark.parametrize("path, body, param", [
    ("/api/v1/chat", {"input": "Hi " * 3000}, "input"),
    ("/api/v1/chat", {"input": "Hi", "system_prompt": "Be brief. " * 3000}, "input"),
    ("/api/v0/chat/completions", {"messages": [{"role": "user", "content": "Hi " * 3000}]}, "messages"),
    ("/api/v0/completions", {"prompt": "Hi " * 3000}, "prompt"),
], ids=["input", "system prompt", "v0-chat", "v0-completions"])
async def test_a_prompt_past_the_context_is_worded_as_lm_studio_words_it(fake, path, body, param):
    """LM Studio's own routes name their fields and word the overflow as LM Studio does (its engine's n_keep check),
    which clients match ("greater than the context length"); it was vLLM's sentence, LM Studio's /v1 words none."""
    client, servicer = fake
    response = await client.post(path, json={"model": "fake-model", **body})
    error = (await response.json())["error"]
    assert response.status == 400 and error["code"] == "context_length_exceeded" and error["param"] == param
    num_prompt = int(error["message"].split("n_keep: ")[1].split(">=")[0])
    assert num_prompt >= 2048 and error["message"] == (
        f"The number of tokens to keep from the initial prompt is greater than the context length (n_keep: "
        f"{num_prompt}>= n_ctx: 2048). Try to load the model with a larger context length, or provide a shorter input.")
    assert servicer.script.requests == []


async def test_an_output_limit_below_one_names_max_output_tokens(fake):
    client, _ = fake
    response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Hi", "max_output_tokens": 0})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "max_output_tokens"
    assert "max_output_tokens" in error["message"] and "max_tokens" not in error["message"]


@pytest.mark.parametrize("error, kind", [
    (InternalError("boom"), "internal_error"), (Unavailable("worker down"), "internal_error"),
    (InvalidRequest("bad", param="input"), "invalid_request"), (NotFound("no model"), "model_not_found"),
    (NotImplementedApi("no"), "not_implemented"),
], ids=["internal", "unavailable", "invalid", "not-found", "not-implemented"])
def test_the_error_events_type_is_one_of_lm_studios(error, kind):
    assert event_error_type(error) == kind


async def test_a_failure_mid_stream_is_lm_studios_internal_error_event(fake):
    """LM Studio's error event names its kind with its own types (streaming-events: invalid_request, unknown, ...,
    internal_error), not OpenAI's server_error."""
    client, servicer = fake
    servicer.script.reply, servicer.script.abort_after = "Hello world again", 2
    response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Hi", "stream": True,
                                                        "reasoning": "off"})
    events = [orjson.loads(line[6:]) for line in (await response.read()).decode().splitlines()
              if line.startswith("data: ")]
    error = next(event for event in events if event["type"] == "error")["error"]
    assert error["type"] == "internal_error" and error["message"], error
    assert events[-1]["type"] == "chat.end"


@pytest.mark.parametrize("path, body, status, kind", [
    ("/api/v1/chat", {"model": "fake-model", "input": [{"type": "video", "content": "x"}]}, 400, "invalid_request"),
    ("/api/v1/chat", {"model": "fake-model", "input": "Hi", "seed": 1}, 400, "invalid_request"),
    ("/api/v1/chat", {"model": "qwen/qwen3-4b", "input": "Hi"}, 404, "model_not_found"),
    ("/api/v1/models/load", {"model": "qwen/qwen3-4b"}, 404, "model_not_found"),
    ("/api/v1/models/download", {"model": "qwen/qwen3-4b"}, 501, "not_implemented"),
], ids=["bad input", "unknown key", "chat model", "load model", "download"])
async def test_an_api_v1_error_has_lm_studios_type(fake, path, body, status, kind):
    """LM Studio's /api/v1 answers a bad body with its own error type, {"error": {"message": "Invalid discriminator
    value. Expected 'text' | 'image'", "type": "invalid_request", "code": "invalid_union", "param": "input"}}
    (lmstudio-ai/docs#253), the types its stream's error event has; these were OpenAI's (invalid_request_error,
    not_found_error). /api/v0, LM Studio's OpenAI-shaped API, keeps OpenAI's."""
    client, _ = fake
    response = await client.post(path, json=body)
    error = (await response.json())["error"]
    assert response.status == status and error["type"] == kind, error
    assert set(error) == {"message", "type", "param", "code"}
    if "input" in body and not isinstance(body["input"], str):
        # LM Studio's server reads "text" items (its docs write "message"): the error names the one it reads.
        assert error["message"].startswith('input[0] must be {"type": "text", "content": "<text>"}')
    response = await client.get("/api/v1/models/download/status/job_1")
    assert (await response.json())["error"]["type"] == "job_not_found"
    response = await client.post("/api/v0/chat/completions", json={"model": "qwen/qwen3-4b", "messages": [
        {"role": "user", "content": "Hi"}]})
    # LM Studio's own answer there: 400 'Invalid model identifier' (test_lmstudio_unknown_model.py), OpenAI's type.
    assert (await response.json())["error"]["type"] == "invalid_request_error"
