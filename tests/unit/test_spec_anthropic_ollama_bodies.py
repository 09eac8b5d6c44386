"""/v1/messages and Ollama's /api routes held up to their published schemas (spec_schemas/: anthropic-sdk-python's
Message, RawMessageStreamEvent, MessageTokensCount, ModelInfo and ErrorResponse as JSON Schema; ollama's
docs/openapi.yaml ChatResponse, ChatStreamEvent, GenerateResponse, GenerateStreamEvent, ListResponse, PsResponse,
ShowResponse, StatusEvent, ErrorResponse) and Ollama's to ollama-python's types validated strictly, whole and
streamed. An Anthropic stream comes in the order the SDK's MessageStream accumulator (lib/streaming/_messages.py
accumulate_event) reads it: message_start, then each content block's start, deltas and stop at its own index in
turn, then message_delta and message_stop."""

import grpc
import ollama
import pytest

from tests.unit.spec_oracle import ndjson, spec_errors, sse, strict
from tests.unit.test_spec_openai_bodies import REPLIES, TOOLS

HEADERS = {"anthropic-version": "2023-06-01"}
ANTHROPIC_TOOLS = [{"name": "get_weather", "input_schema": TOOLS[0]["function"]["parameters"]}]
MESSAGES = {"plain": {}, "max_tokens": {"max_tokens": 2}, "stop_sequence": {"stop_sequences": ["world"]},
            "tools": {"tools": ANTHROPIC_TOOLS}, "tool_any": {"tools": ANTHROPIC_TOOLS, "tool_choice": {"type": "any"}},
            "thinking": {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 1500}}
OLLAMA = {"plain": {}, "num_predict": {"options": {"num_predict": 2}}, "stop": {"options": {"stop": ["world"]}},
          "json": {"format": "json"}, "think": {"think": True}, "no_think": {"think": False},
          "logprobs": {"logprobs": True, "top_logprobs": 2}}


def block_order(events: list) -> list:
    """The stream's event types with each content block's run collapsed to (start, index), as the accumulator
    needs them: a delta or stop only for the block started last."""
    order, open_index = [], None
    for _, event in events:
        kind = event["type"]
        if kind == "content_block_start":
            assert open_index is None and event["index"] == sum(1 for o in order if o[0] == "block")
            open_index = event["index"]
            order.append(("block", open_index))
        elif kind in ("content_block_delta", "content_block_stop"):
            assert event["index"] == open_index
            open_index = None if kind == "content_block_stop" else open_index
        elif kind != "ping":
            order.append((kind,))
    assert open_index is None
    return order


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("reply", REPLIES, ids=list(REPLIES))
@pytest.mark.parametrize("variant", MESSAGES, ids=list(MESSAGES))
async def test_messages_match_anthropics_types(stack, variant, reply, stream):
    client, fake = stack
    fake.script.reply = REPLIES[reply]
    body = {"model": "fake-model", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}],
            "stream": stream, **MESSAGES[variant]}
    response = await client.post("/v1/messages", json=body, headers=HEADERS)
    assert response.status == 200, await response.text()
    if not stream:
        assert spec_errors("anthropic", "Message", await response.json()) == []
        return
    events = sse(await response.read())
    for name, event in events:
        assert name == event["type"]
        assert event["type"] == "ping" or spec_errors("anthropic", "RawMessageStreamEvent", event) == []
    order = block_order(events)
    assert order[0] == ("message_start",) and order[-2:] == [("message_delta",), ("message_stop",)]


async def test_anthropic_count_models_and_errors_match_anthropics_types(stack):
    client, fake = stack
    counted = await (await client.post("/v1/messages/count_tokens", headers=HEADERS, json={
        "model": "fake-model", "messages": [{"role": "user", "content": "Hi"}]})).json()
    listed = await (await client.get("/v1/models", headers=HEADERS)).json()
    one = await (await client.get("/v1/models/fake-model", headers=HEADERS)).json()
    assert spec_errors("anthropic", "MessageTokensCount", counted) + spec_errors("anthropic", "ModelInfo", one) == []
    assert [e for m in listed["data"] for e in spec_errors("anthropic", "ModelInfo", m)] == []
    for body, scripted, status in [({"model": "fake-model", "messages": []}, None, 400),
                                   ({"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}, None, 404),
                                   ({"model": "fake-model", "max_tokens": 5, "messages": [
                                       {"role": "user", "content": "x"}]}, grpc.StatusCode.UNAVAILABLE, 503)]:
        fake.script.error = scripted
        response = await client.post("/v1/messages", json=body, headers=HEADERS)
        assert response.status == status
        assert spec_errors("anthropic", "ErrorResponse", await response.json()) == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("reply", REPLIES, ids=list(REPLIES))
@pytest.mark.parametrize("variant", OLLAMA, ids=list(OLLAMA))
@pytest.mark.parametrize("route", ["/api/chat", "/api/generate"])
async def test_ollama_answers_match_ollamas_schema(stack, route, variant, reply, stream):
    client, fake = stack
    fake.script.reply, fake.script.top_ids = REPLIES[reply], [5, 6, 7]
    ask = {"messages": [{"role": "user", "content": "Hi"}], "tools": TOOLS} if route == "/api/chat" else {"prompt": "Hi"}
    response = await client.post(route, json={"model": "fake-model", "stream": stream, **ask, **OLLAMA[variant]})
    assert response.status == 200, await response.text()
    whole, typed = ("ChatResponse", ollama.ChatResponse) if route == "/api/chat" else \
        ("GenerateResponse", ollama.GenerateResponse)
    answers = ndjson(await response.read()) if stream else [await response.json()]
    for answer in answers:
        schema = whole.replace("Response", "StreamEvent") if stream else whole
        assert spec_errors("ollama", schema, answer) + spec_errors("ollama", whole, answer) == []
        assert strict(typed, answer) == []
    assert [a["done"] for a in answers] == [False] * (len(answers) - 1) + [True]


async def test_ollama_discovery_and_errors_match_ollamas_schema(stack):
    client, fake = stack
    assert (await client.post("/api/generate", json={"model": "fake-model"})).status == 200
    for method, path, body, schema, typed in [
            ("GET", "/api/tags", None, "ListResponse", ollama.ListResponse),
            ("GET", "/api/ps", None, "PsResponse", ollama.ProcessResponse),
            ("POST", "/api/show", {"model": "fake-model"}, "ShowResponse", ollama.ShowResponse),
            ("GET", "/api/version", None, "VersionResponse", None),
            ("POST", "/api/pull", {"model": "fake-model", "stream": False}, "StatusResponse", ollama.ProgressResponse)]:
        answer = await (await client.request(method, path, json=body)).json()
        assert spec_errors("ollama", schema, answer) + (strict(typed, answer) if typed else []) == []
    for body, scripted, status in [({"model": "fake-model", "messages": "x"}, None, 400),
                                   ({"model": "nope", "messages": []}, None, 404),
                                   ({"model": "fake-model", "messages": [{"role": "user", "content": "x"}],
                                     "stream": False}, grpc.StatusCode.UNAVAILABLE, 503)]:
        fake.script.error = scripted
        response = await client.post("/api/chat", json=body)
        error = await response.json()
        assert (response.status, list(error)) == (status, ["error"])
        assert spec_errors("ollama", "ErrorResponse", error) == []


async def test_the_oracle_refuses_a_message_start_without_type_and_role(stack):
    """vLLM #45367: its message_start dropped message.type and .role (exclude_unset) and strict Anthropic clients
    refused the stream; the schema refuses that event, and ollama's a done that is no boolean."""
    client, _ = stack
    response = await client.post("/v1/messages", headers=HEADERS, json={
        "model": "fake-model", "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}], "stream": True})
    start = sse(await response.read())[0][1]
    assert start["type"] == "message_start" and spec_errors("anthropic", "RawMessageStreamEvent", start) == []
    del start["message"]["type"], start["message"]["role"]
    assert spec_errors("anthropic", "RawMessageStreamEvent", start)
    assert spec_errors("ollama", "ChatResponse", {"model": "m", "done": "true"})
