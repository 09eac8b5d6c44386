"""End to end: Anthropic's /v1/messages over plain HTTP against the scheduler + worker + gateway processes (tiny model,
greedy, so a streamed and a non-streamed answer to one body are the same message)."""
import httpx
import pytest

from tests.unit.anthropic_sse import accumulate, parse_events

BODY = {"model": "tiny", "max_tokens": 24, "temperature": 0, "thinking": {"type": "disabled"},
        "system": [{"type": "text", "text": "You are terse."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Name three colours."}]}]}
HEADERS = {"x-api-key": "unused", "anthropic-version": "2023-06-01"}


@pytest.fixture(scope="module")
def http(api_gateway):
    with httpx.Client(base_url=api_gateway, timeout=120, headers=HEADERS) as session:
        yield session


def both(http, body: dict) -> tuple[dict, dict]:
    response = http.post("/v1/messages", json=body)
    assert response.status_code == 200, response.text
    streamed = http.post("/v1/messages", json={**body, "stream": True})
    assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
    return response.json(), accumulate(parse_events(streamed.content))


# Thinking on without a budget: "enabled" needs max_tokens above its budget_tokens, which is at least 1024.
@pytest.mark.parametrize("thinking", [{"type": "disabled"}, {"type": "adaptive"}],
                         ids=["thinking off", "thinking on"])
def test_streamed_and_whole_agree_and_usage_is_counted(http, thinking):
    whole, streamed = both(http, {**BODY, "thinking": thinking})
    assert whole["id"].startswith("msg_") and streamed["id"].startswith("msg_")
    assert {**streamed, "id": whole["id"]} == whole
    assert whole["type"] == "message" and whole["role"] == "assistant" and whole["model"] == "tiny"
    assert whole["content"][0]["type"] == ("thinking" if thinking["type"] == "adaptive" else "text")
    assert whole["stop_reason"] in ("end_turn", "max_tokens") and whole["stop_sequence"] is None
    assert 1 <= whole["usage"]["output_tokens"] <= 24
    counted = http.post("/v1/messages/count_tokens", json={key: value for key, value in BODY.items() if key in (
        "model", "system", "messages")} | {"thinking": thinking})
    # A prefix-cache hit is a cache read, not input: the two make up the prompt count_tokens counts.
    num_prompt = whole["usage"]["input_tokens"] + whole["usage"]["cache_read_input_tokens"]
    assert counted.status_code == 200 and counted.json() == {"input_tokens": num_prompt}


def test_stop_sequence(http):
    text = http.post("/v1/messages", json=BODY).json()["content"][0]["text"]
    # A character that first appears after the start: the answer stops right before it.
    cut = next(i for i, c in enumerate(text) if i and c.strip() and c != "\ufffd" and c not in text[:i])
    whole, streamed = both(http, {**BODY, "stop_sequences": ["no such text", text[cut]]})
    assert whole["stop_reason"] == "stop_sequence" and whole["stop_sequence"] == text[cut]
    assert whole["content"] == [{"type": "text", "text": text[:cut]}]
    assert {**streamed, "id": whole["id"]} == whole


@pytest.mark.parametrize("change, status, kind", [
    ({"model": "claude-sonnet-4-5"}, 404, "not_found_error"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}]}, 400, "invalid_request_error"),
], ids=["unknown model", "image"])
def test_refusals(http, change, status, kind):
    response = http.post("/v1/messages", json={**BODY, **change})
    assert response.status_code == status
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == kind and body["error"]["message"]
