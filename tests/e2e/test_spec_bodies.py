"""End to end: the real stack's bodies (the tiny model's own tokens, byte-level text with U+FFFD where its bytes are
no UTF-8, logprobs under a grammar's mask, its own finish reasons) held up to the schemas the APIs publish
(tests/unit/spec_schemas, read by tests/unit/spec_oracle.py: openai-openapi, ollama's docs/openapi.yaml,
anthropic-sdk-python's types), whole and streamed. tests/unit/test_spec_*.py cover the routes' variants on the fake
scheduler; this file covers what only a real model writes."""
import pytest

from tests.unit.spec_oracle import branch, ndjson, spec_errors, sse

USER = [{"role": "user", "content": "Hi"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
STREAM = {"stream": True, "stream_options": {"include_usage": True}}
CHAT = {"json_top20": {"response_format": {"type": "json_object"}, "logprobs": True, "top_logprobs": 20,
                       "chat_template_kwargs": {"enable_thinking": False}},
        "hot_n3": {"temperature": 2.0, "logprobs": True, "top_logprobs": 3, "n": 3},
        "tool_required": {"tools": TOOLS, "tool_choice": "required", "max_tokens": 40}}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("variant", CHAT, ids=list(CHAT))
def test_chat_bodies_match_openais_schema(http, variant, stream):
    body = {"model": "tiny", "messages": USER, "max_tokens": 8, **CHAT[variant], **(STREAM if stream else {})}
    response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    if not stream:
        assert spec_errors("openai", "CreateChatCompletionResponse", response.json()) == []
        return
    events = sse(response.content)
    assert events[-1] == (None, "[DONE]") and events[-2][1]["usage"]["completion_tokens"] > 0
    assert [e for _, chunk in events[:-1] for e in spec_errors("openai", "CreateChatCompletionStreamResponse", chunk)] == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_completion_with_echo_and_logprobs_matches_openais_schema(http, stream):
    body = {"model": "tiny", "prompt": "Hello there", "echo": True, "logprobs": 5, "max_tokens": 6, "n": 2,
            "temperature": 1.5, **(STREAM if stream else {})}
    response = http.post("/v1/completions", json=body)
    assert response.status_code == 200, response.text
    answers = [chunk for _, chunk in sse(response.content)[:-1]] if stream else [response.json()]
    assert [e for answer in answers for e in spec_errors("openai", "CreateCompletionResponse", answer)] == []


def test_response_stream_with_logprobs_matches_openais_schema(http):
    body = {"model": "tiny", "input": "Hi", "top_logprobs": 5, "max_output_tokens": 8, "stream": True,
            "include": ["message.output_text.logprobs"], "reasoning": {"effort": "low"}}
    response = http.post("/v1/responses", json=body)
    assert response.status_code == 200, response.text
    events = sse(response.content)
    assert events[-1][0] in ("response.completed", "response.incomplete")
    assert [e for name, event in events
            for e in spec_errors("openai", branch("openai", "ResponseStreamEvent", name), event)] == []


def test_anthropic_stream_with_thinking_matches_anthropics_types(http):
    body = {"model": "tiny", "max_tokens": 1100, "messages": USER, "stream": True,
            "thinking": {"type": "enabled", "budget_tokens": 1024}, "stop_sequences": ["e"]}
    response = http.post("/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"})
    assert response.status_code == 200, response.text
    events = [event for _, event in sse(response.content) if event["type"] != "ping"]
    assert events[-1]["type"] == "message_stop"
    assert [e for event in events for e in spec_errors("anthropic", "RawMessageStreamEvent", event)] == []


@pytest.mark.parametrize("route", ["/api/chat", "/api/generate"])
def test_ollama_stream_with_logprobs_matches_ollamas_schema(http, route):
    ask = {"messages": USER} if route == "/api/chat" else {"prompt": "Hi"}
    body = {"model": "tiny", "logprobs": True, "top_logprobs": 3, "think": True, "options": {"num_predict": 8}, **ask}
    response = http.post(route, json=body)
    assert response.status_code == 200, response.text
    schema = "ChatStreamEvent" if route == "/api/chat" else "GenerateStreamEvent"
    whole = schema.replace("StreamEvent", "Response")
    lines = ndjson(response.content)
    assert lines[-1]["done"] is True
    assert [e for line in lines for e in spec_errors("ollama", schema, line) + spec_errors("ollama", whole, line)] == []
