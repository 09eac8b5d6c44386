"""OpenAI request validation: every bad body becomes a typed 400/404 with OpenAI's error shape (no sockets)."""
import pytest

from gateway.errors import ApiError
from gateway.fake_scheduler import FakeServing, build_tokenizer
from gateway.model import ModelCard
from gateway.openai import parse_chat
from gateway.openai_completion import parse_completion

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def card():
    servicer = FakeServing(build_tokenizer(), max_context_len=128)
    import asyncio
    info = asyncio.run(servicer.Info(None, None))
    return ModelCard.from_info(info)


def chat_error(card, **body):
    with pytest.raises(ApiError) as info:
        parse_chat(body, card, "fake-model")
    return info.value


def completion_error(card, **body):
    with pytest.raises(ApiError) as info:
        parse_completion(body, card, "fake-model")
    return info.value


def shape(error):
    body = error.to_dict()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return error.status, body["error"]["type"], body["error"]["param"], body["error"]["code"]


CHAT_CASES = [
    ("messages-missing", {}, (400, "invalid_request_error", "messages", "missing_required_parameter")),
    ("messages-empty", {"messages": []}, (400, "invalid_request_error", "messages", "empty_array")),
    ("messages-not-list", {"messages": "hi"}, (400, "invalid_request_error", "messages", "invalid_type")),
    ("bad-role", {"messages": [{"role": "wizard", "content": "x"}]},
     (400, "invalid_request_error", "messages[0].role", "invalid_value")),
    ("no-role", {"messages": [{"content": "x"}]},
     (400, "invalid_request_error", "messages[0].role", "missing_required_parameter")),
    ("null-user-content", {"messages": [{"role": "user", "content": None}]},
     (400, "invalid_request_error", "messages[0].content", "invalid_value")),
    ("image-part", {"messages": [{"role": "user",
                                  "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     (400, "invalid_request_error", "messages[0].content[0].type", "unsupported")),
    ("max-tokens-zero", {"messages": USER, "max_tokens": 0},
     (400, "invalid_request_error", "max_tokens", "invalid_value")),
    ("max-tokens-negative", {"messages": USER, "max_tokens": -1},
     (400, "invalid_request_error", "max_tokens", "invalid_value")),
    ("max-tokens-string", {"messages": USER, "max_tokens": "ten"},
     (400, "invalid_request_error", "max_tokens", "invalid_type")),
    ("max-completion-zero", {"messages": USER, "max_completion_tokens": 0},
     (400, "invalid_request_error", "max_completion_tokens", "invalid_value")),
    ("temperature-negative", {"messages": USER, "temperature": -0.5},
     (400, "invalid_request_error", "temperature", "invalid_value")),
    ("temperature-list", {"messages": USER, "temperature": [1]},
     (400, "invalid_request_error", "temperature", "invalid_type")),
    ("top-p-zero", {"messages": USER, "top_p": 0}, (400, "invalid_request_error", "top_p", "invalid_value")),
    ("n-zero", {"messages": USER, "n": 0}, (400, "invalid_request_error", "n", "invalid_value")),
    ("presence-out-of-range", {"messages": USER, "presence_penalty": 3},
     (400, "invalid_request_error", "presence_penalty", "invalid_value")),
    ("logit-bias-key", {"messages": USER, "logit_bias": {"abc": 1}},
     (400, "invalid_request_error", "logit_bias", "invalid_value")),
    ("logit-bias-key-superscript-digit", {"messages": USER, "logit_bias": {"²": 1}},
     (400, "invalid_request_error", "logit_bias", "invalid_value")),
    ("logit-bias-key-fullwidth-digits", {"messages": USER, "logit_bias": {"\uff15": 1}},
     (400, "invalid_request_error", "logit_bias", "invalid_value")),
    # A bias past +-100 is served at it, as vLLM clamps it (test_v1_logit_bias_clamp.py); one that is no number is not.
    ("logit-bias-value-type", {"messages": USER, "logit_bias": {"5": "high"}},
     (400, "invalid_request_error", "logit_bias.5", "invalid_type")),
    ("stop-wrong-type", {"messages": USER, "stop": 5}, (400, "invalid_request_error", "stop", "invalid_type")),
    ("stream-options-without-stream", {"messages": USER, "stream_options": {"include_usage": True}},
     (400, "invalid_request_error", "stream_options", "invalid_value")),
    ("unknown-model", {"messages": USER, "model": "gpt-4"}, (404, "not_found_error", "model", "model_not_found")),
    ("context-exceeded", {"messages": [{"role": "user", "content": "hello world " * 200}]},
     (400, "invalid_request_error", "messages", "context_length_exceeded")),
    ("prompt-plus-max-tokens", {"messages": USER, "max_tokens": 120},
     (400, "invalid_request_error", "max_tokens", "context_length_exceeded")),
    ("json-schema-missing", {"messages": USER, "response_format": {"type": "json_schema"}},
     (400, "invalid_request_error", "response_format.json_schema", "invalid_value")),
    # OpenAI and vLLM (JsonSchemaResponseFormat.name) require the name; it was accepted without one.
    ("json-schema-name-missing", {"messages": USER, "response_format": {"type": "json_schema",
                                                                        "json_schema": {"schema": {"type": "object"}}}},
     (400, "invalid_request_error", "response_format.json_schema.name", "missing_required_parameter")),
    ("json-schema-name-not-a-string", {"messages": USER, "response_format": {
        "type": "json_schema", "json_schema": {"name": 5, "schema": {"type": "object"}}}},
     (400, "invalid_request_error", "response_format.json_schema.name", "invalid_type")),
    ("json-schema-invalid", {"messages": USER, "response_format": {"type": "json_schema",
                                                                   "json_schema": {"name": "x", "schema": {"type": 5}}}},
     (400, "invalid_request_error", "response_format.json_schema.schema", "invalid_value")),
    ("json-schema-unenforceable", {"messages": USER, "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "not": {}}}}},
     (400, "invalid_request_error", "response_format", "unsupported_schema")),
    # response_format with tools is honoured (a call or the JSON); vLLM's guided fields beside forced tool calls are
    # not (beside tool_choice auto the guided grammar is the answer's, as vLLM: test_gateway_guided.py).
    ("guided-with-tools", {"messages": USER, "guided_choice": ["a"], "tool_choice": "required",
                           "tools": [{"type": "function", "function": {"name": "f"}}]},
     (400, "invalid_request_error", "guided_choice", "unsupported")),
    ("required-without-tools", {"messages": USER, "tool_choice": "required"},
     (400, "invalid_request_error", "tool_choice", "invalid_value")),
    ("unknown-named-tool", {"messages": USER, "tool_choice": {"type": "function", "function": {"name": "nope"}},
                            "tools": [{"type": "function", "function": {"name": "f"}}]},
     (400, "invalid_request_error", "tool_choice", "invalid_value")),
    ("required-parameters-not-a-schema", {"messages": USER, "tool_choice": "required", "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "required": 3}}}]},
     (400, "invalid_request_error", "tools[0].function.parameters", "invalid_function_parameters")),
    ("required-parameters-unenforceable", {"messages": USER, "tool_choice": "required", "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"a": {"type": "object", "not": {}}}}}}]},
     (400, "invalid_request_error", "tools", "unsupported_schema")),
    ("bad-effort", {"messages": USER, "reasoning_effort": "maximum"},
     (400, "invalid_request_error", "reasoning_effort", "invalid_value")),
]


@pytest.mark.parametrize("body,expected", [c[1:] for c in CHAT_CASES], ids=[c[0] for c in CHAT_CASES])
def test_chat_rejections(card, body, expected):
    assert shape(chat_error(card, **body)) == expected


def test_context_error_names_the_numbers(card):
    error = chat_error(card, messages=USER, max_tokens=120)
    assert "maximum context length is 128 tokens" in error.message
    assert "120 in the completion" in error.message


def test_non_object_body_is_a_400(card):
    with pytest.raises(ApiError) as info:
        parse_chat([1, 2], card, "fake-model")
    assert shape(info.value)[:2] == (400, "invalid_request_error")


COMPLETION_CASES = [
    ("prompt-missing", {}, (400, "invalid_request_error", "prompt", "missing_required_parameter")),
    ("prompt-number", {"prompt": 5}, (400, "invalid_request_error", "prompt", "invalid_type")),
    ("max-tokens-zero-no-echo", {"prompt": "hi", "max_tokens": 0},
     (400, "invalid_request_error", "max_tokens", "invalid_value")),
    ("max-tokens-negative", {"prompt": "hi", "max_tokens": -1},
     (400, "invalid_request_error", "max_tokens", "invalid_value")),
    ("max-tokens-huge", {"prompt": "hi", "max_tokens": 10_000_000},
     (400, "invalid_request_error", "max_tokens", "context_length_exceeded")),
    ("echo-logprobs-21", {"prompt": "hi", "echo": True, "logprobs": 21, "max_tokens": 0},
     (400, "invalid_request_error", "logprobs", "invalid_value")),
    ("prompt-logprobs-negative", {"prompt": "hi", "prompt_logprobs": -1},
     (400, "invalid_request_error", "prompt_logprobs", "invalid_value")),
    ("prompt-logprobs-21", {"prompt": "hi", "prompt_logprobs": 21},
     (400, "invalid_request_error", "prompt_logprobs", "invalid_value")),
    ("prompt-logprobs-stream", {"prompt": "hi", "prompt_logprobs": 1, "stream": True},
     (400, "invalid_request_error", "prompt_logprobs", "invalid_value")),
    ("suffix", {"prompt": "hi", "suffix": "end"}, (400, "invalid_request_error", "suffix", "unsupported")),
    ("token-out-of-vocab", {"prompt": [1, 2, 99999]}, (400, "invalid_request_error", "prompt", "invalid_value")),
]


@pytest.mark.parametrize("body,expected", [c[1:] for c in COMPLETION_CASES], ids=[c[0] for c in COMPLETION_CASES])
def test_completion_rejections(card, body, expected):
    assert shape(completion_error(card, **body)) == expected


def test_accepted_values_translate_into_the_internal_request(card):
    plan = parse_chat({"model": "default", "messages": USER, "max_completion_tokens": 5, "temperature": 0,
                       "top_k": 3, "min_p": 0.1, "seed": 7, "stop": "END", "n": 2, "logprobs": True,
                       "top_logprobs": 2, "user": "u1", "presence_penalty": 0.5, "logit_bias": {"5": -100},
                       "stream": True, "stream_options": {"include_usage": True}}, card, "fake-model")
    gen = plan.gen
    assert (gen.max_tokens, gen.n, gen.stop, gen.num_logprobs) == (5, 2, ["END"], 2)
    assert (gen.sampling.temperature, gen.sampling.top_k, gen.sampling.seed) == (0.0, 3, 7)
    assert gen.sampling.logit_bias == {5: -100.0} and gen.sampling.presence_penalty == 0.5
    assert plan.stream and plan.include_usage and gen.thinking_open and gen.split_reasoning


def test_defaults_come_from_generation_config_and_fill_the_context(card):
    plan = parse_chat({"messages": USER, "max_tokens": None}, card, "fake-model")
    assert plan.gen.sampling.temperature == 0.7            # FakeServing's generation_config
    assert plan.gen.max_tokens == 128 - len(plan.gen.prompt_ids)


def test_model_aliases_are_accepted(card):
    for name in ("fake-model", "default", "fake-model:latest", None):
        assert parse_completion({"model": name, "prompt": "hi"}, card, "fake-model").gen.max_tokens == 16


def test_echo_with_zero_tokens_is_allowed(card):
    plan = parse_completion({"prompt": "hi there", "max_tokens": 0, "echo": True}, card, "fake-model")
    assert plan.gen.max_tokens == 0 and plan.echo_texts == ["hi there"]


def test_thinking_switches(card):
    off = parse_chat({"messages": USER, "chat_template_kwargs": {"enable_thinking": False}}, card, "m")
    assert not off.gen.thinking_open
    assert not parse_chat({"messages": USER, "enable_thinking": False}, card, "m").gen.thinking_open
    assert not parse_chat({"messages": USER, "reasoning_effort": "none"}, card, "m").gen.thinking_open
    assert parse_chat({"messages": USER, "reasoning_effort": "low"}, card, "m").gen.thinking_open
