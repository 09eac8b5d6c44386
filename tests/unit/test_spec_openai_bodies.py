"""/v1/chat/completions, /v1/completions, /v1/models and the OpenAI-shaped errors held up to OpenAI's published schemas
(openai/openai-openapi openapi.yaml: CreateChatCompletionResponse, CreateChatCompletionStreamResponse,
CreateCompletionResponse, ListModelsResponse, Model, ErrorResponse; trimmed copy in spec_schemas/) and to
openai-python's types, validated strictly (ChatCompletion, ChatCompletionChunk, Completion, Model: generated from the
same spec), whole and streamed, with tools, reasoning, logprobs, n > 1, stop / length / tool_calls, usage and echo.
A streamed answer is also run through the SDK's own accumulator (client.chat.completions.stream's
ChatCompletionStreamState), as a client that streams reads it."""
import json

import grpc
import pytest
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.types import Completion, Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tests.unit.spec_oracle import spec_errors, sse, strict

CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
THINK = "Let me see.</think>\n\nHello world"
REPLIES = {"text": "Hello world", "call": CALL, "think": THINK}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CHAT = {"plain": {}, "length": {"max_tokens": 2}, "stop": {"stop": ["world"]}, "n2": {"n": 2},
        "logprobs": {"logprobs": True, "top_logprobs": 2}, "json": {"response_format": {"type": "json_object"}},
        "tools": {"tools": TOOLS}, "tool_choice_none": {"tools": TOOLS, "tool_choice": "none"},
        "thinking_off": {"chat_template_kwargs": {"enable_thinking": False}}, "echo": {"echo": True}}
COMPLETION = {"plain": {}, "length": {"max_tokens": 1}, "stop": {"stop": "world"}, "n2": {"n": 2},
              "logprobs": {"logprobs": 2}, "echo_logprobs": {"echo": True, "logprobs": 1}, "prompts": {"prompt": ["a", "b"]}}
STREAM = {"stream": True, "stream_options": {"include_usage": True}}


def sdk_allowed(errors: list, path: str) -> list:
    """openai-python's Completion types finish_reason and token logprobs as the spec does; ALLOWED's reasons."""
    skip = ("choices/0/finish_reason", "choices/1/finish_reason", "logprobs/token_logprobs/0", "logprobs/top_logprobs/0")
    return [e for e in errors if not (path == "/v1/completions" and any(s in e for s in skip))]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("reply", REPLIES, ids=list(REPLIES))
@pytest.mark.parametrize("variant", CHAT, ids=list(CHAT))
async def test_chat_bodies_match_openais_schema(stack, variant, reply, stream):
    client, fake = stack
    fake.script.reply, fake.script.top_ids = REPLIES[reply], [5, 6, 7]
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "Hi"}], **CHAT[variant]}
    response = await client.post("/v1/chat/completions", json={**body, **(STREAM if stream else {})})
    assert response.status == 200, await response.text()
    if not stream:
        answer = await response.json()
        assert spec_errors("openai", "CreateChatCompletionResponse", answer) + strict(ChatCompletion, answer) == []
        return
    events = sse(await response.read())
    assert events[-1] == (None, "[DONE]")
    state = ChatCompletionStreamState(input_tools=body.get("tools", TOOLS))
    for _, chunk in events[:-1]:
        assert spec_errors("openai", "CreateChatCompletionStreamResponse", chunk) == []
        assert strict(ChatCompletionChunk, chunk) == []
        state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
    snapshot = state.current_completion_snapshot
    for choice in snapshot.choices:
        calls = choice.message.tool_calls or []
        assert (choice.finish_reason == "tool_calls") == bool(calls)
        assert [json.loads(c.function.arguments) for c in calls] == ([{"city": "Paris"}] if calls else [])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("variant", COMPLETION, ids=list(COMPLETION))
async def test_completion_bodies_match_openais_schema(stack, variant, stream):
    client, fake = stack
    fake.script.top_ids = [5, 6, 7]
    body = {"model": "fake-model", "prompt": "Hi", **COMPLETION[variant], **(STREAM if stream else {})}
    response = await client.post("/v1/completions", json=body)
    assert response.status == 200, await response.text()
    answers = [data for _, data in sse(await response.read())[:-1]] if stream else [await response.json()]
    for answer in answers:
        assert spec_errors("openai", "CreateCompletionResponse", answer) == []
        assert sdk_allowed(strict(Completion, answer), "/v1/completions") == []


async def test_model_list_and_model_match_openais_schema(stack):
    client, _ = stack
    listed = await (await client.get("/v1/models")).json()
    one = await (await client.get("/v1/models/fake-model")).json()
    assert spec_errors("openai", "ListModelsResponse", listed) + spec_errors("openai", "Model", one) == []
    assert strict(Model, listed["data"][0]) + strict(Model, one) == []


ERRORS = {"bad_body": ("POST", "/v1/chat/completions", {"model": "fake-model", "messages": "x"}, None, 400),
          "bad_value": ("POST", "/v1/chat/completions", {"model": "fake-model", "messages": [], "temperature": -1},
                        None, 400),
          "unknown_model": ("POST", "/v1/completions", {"model": "nope", "prompt": "x"}, None, 404),
          "unknown_route": ("GET", "/v1/nope", None, None, 404),
          "too_long": ("POST", "/v1/completions", {"model": "fake-model", "prompt": "Hi " * 3000}, None, 400),
          "unavailable": ("POST", "/v1/chat/completions", {"model": "fake-model", "messages": [{"role": "user",
                          "content": "x"}]}, grpc.StatusCode.UNAVAILABLE, 503)}


@pytest.mark.parametrize("case", ERRORS, ids=list(ERRORS))
async def test_errors_match_openais_error_response(stack, case):
    client, fake = stack
    method, path, body, scripted, status = ERRORS[case]
    fake.script.error = scripted
    response = await client.request(method, path, json=body)
    assert response.status == status
    assert spec_errors("openai", "ErrorResponse", await response.json()) == []


async def test_the_oracle_refuses_what_the_spec_refuses(stack):
    """The schemas are alive: a body with a finish_reason outside the spec's enum, a choice without logprobs, or an
    error without its message, each fails."""
    client, _ = stack
    answer = await (await client.post("/v1/chat/completions", json={
        "model": "fake-model", "messages": [{"role": "user", "content": "Hi"}]})).json()
    assert spec_errors("openai", "CreateChatCompletionResponse", answer) == []
    answer["choices"][0]["finish_reason"] = "abort"
    assert spec_errors("openai", "CreateChatCompletionResponse", answer)
    del answer["choices"][0]["logprobs"]
    assert len(spec_errors("openai", "CreateChatCompletionResponse", answer)) == 2
    assert spec_errors("openai", "ErrorResponse", {"error": {"type": "x", "param": None, "code": None}})
