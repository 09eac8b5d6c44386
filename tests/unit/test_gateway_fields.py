"""/v1 fields beyond OpenAI's core (fake scheduler): refused ones are a 400 naming them (guided decoding:
test_gateway_guided.py), include_stop_str_in_output, prompt shaping (add_generation_prompt,
continue_final_message, chat_template, truncate_prompt_tokens), unknown fields logged once."""
import logging

import orjson
import pytest

from gateway import openai_fields
from gateway.once_log import MAX_REMEMBERED, MAX_SHOWN

CHAT = "/v1/chat/completions"
BASE = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "enable_thinking": False,
        "max_tokens": 8}
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]


async def post(client, body, path=CHAT):
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def stream_text(client, body) -> str:
    response = await client.post(CHAT, data=orjson.dumps({**body, "stream": True}))
    assert response.status == 200
    text = ""
    for line in (await response.read()).decode().split("\n\n"):
        if line.startswith("data: {"):
            for choice in orjson.loads(line[6:])["choices"]:
                text += choice["delta"].get("content") or ""
    return text


REFUSED = [("use_beam_search", True),
           ("best_of", 4),
           ("mirostat", 3), ("modalities", ["text", "audio"]),
           ("audio", {"voice": "alloy", "format": "wav"})]


@pytest.mark.parametrize("name,value", REFUSED, ids=[r[0] for r in REFUSED])
async def test_output_changing_fields_are_refused_by_name(stack, name, value):
    client, fake = stack
    status, body = await post(client, {**BASE, name: value})
    assert status == 400 and body["error"]["code"] == "unsupported" and body["error"]["param"] == name
    assert body["error"]["message"].startswith(f"{name}: ") and not fake.script.requests


@pytest.mark.parametrize("name,value", [("mirostat", 3)])
async def test_completions_refuse_the_same_sampler_fields(stack, name, value):
    client, _ = stack
    status, body = await post(client, {"model": "default", "prompt": "hi", name: value}, "/v1/completions")
    assert status == 400 and body["error"]["code"] == "unsupported" and body["error"]["param"] == name


async def test_fields_without_effect_and_defaults_are_accepted(stack):
    client, _ = stack
    extra = {"user": "u", "metadata": {"a": "b"}, "store": False, "service_tier": "auto", "priority": 0,
             "skip_special_tokens": True, "spaces_between_special_tokens": True, "request_id": "r",
             "cache_salt": "s", "logprobs": False, "use_beam_search": False, "length_penalty": 1, "typical_p": 1,
             "mirostat": 0, "modalities": ["text"], "best_of": 1, "echo": False, "bad_words": []}
    status, body = await post(client, {**BASE, **extra})
    assert status == 200 and body["choices"][0]["message"]["content"] == "Hello world"


@pytest.mark.parametrize("path", [CHAT, "/api/v0/chat/completions"])
@pytest.mark.parametrize("prediction", ["def f():\n    return 1\n", [{"type": "text", "text": "def f():"}]],
                         ids=["text", "parts"])
async def test_a_prediction_is_served_as_the_same_request_without_it(stack, path, prediction):
    """OpenAI's Predicted Outputs only speed an answer up (the output is the model's own either way), and vLLM,
    Ollama, llama.cpp and LM Studio ignore the field; Continue sends it on its apply edits to models named gpt-4o or
    mistral-large (core/llm/llms/OpenAI.ts supportsPrediction). It was a 400 unsupported naming prediction."""
    client, fake = stack
    body = {**BASE, "prediction": {"type": "content", "content": prediction}}
    status, answer = await post(client, body, path)
    assert status == 200, answer
    assert answer["choices"][0]["message"]["content"] == "Hello world"
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert await stream_text(client, body) == "Hello world"


@pytest.mark.parametrize("prediction", ["x", {"type": "text", "content": "x"}, {"type": "content"},
                                        {"type": "content", "content": 5}])
async def test_a_prediction_of_another_shape_is_a_400(stack, prediction):
    """Typed as OpenAI's ChatCompletionPredictionContentParam: {type: "content", content: text or text parts}."""
    client, fake = stack
    status, body = await post(client, {**BASE, "prediction": prediction})
    assert status == 400 and body["error"]["param"].startswith("prediction"), body
    assert not fake.script.requests


async def test_unknown_fields_are_accepted_and_logged_once(stack, caplog):
    client, _ = stack
    openai_fields._unknown.seen.discard("x_sdk_field")
    with caplog.at_level(logging.WARNING, logger="sparkinfer.gateway"):
        for _ in range(2):
            status, body = await post(client, {**BASE, "x_sdk_field": 1})
            assert status == 200 and body["choices"][0]["message"]["content"] == "Hello world"
    warnings = [r.getMessage() for r in caplog.records if "x_sdk_field" in r.getMessage()]
    assert warnings == ["ignoring unknown request fields 'x_sdk_field' (each name logged once)"]


SGLANG_NO_EFFECT = {"extra_key": "k", "routed_dp_rank": 0, "data_parallel_rank": 0, "disagg_prefill_dp_rank": 0,
                    "bootstrap_host": "h", "bootstrap_port": 1, "bootstrap_room": 2, "custom_labels": {"a": "b"},
                    "ngram_corpus_id": "c", "custom_params": {"a": 1}}


@pytest.mark.parametrize("path", [CHAT, "/v1/completions"])
async def test_sglang_routing_fields_are_known_and_change_nothing(stack, caplog, path):
    client, _ = stack
    body = BASE if path == CHAT else {"model": "default", "prompt": "hi", "max_tokens": 8}
    openai_fields._unknown.seen.difference_update(SGLANG_NO_EFFECT)
    with caplog.at_level(logging.WARNING, logger="sparkinfer.gateway"):
        plain = await post(client, body, path)
        status, answer = await post(client, {**body, **SGLANG_NO_EFFECT}, path)
    assert status == 200 and answer["choices"][0] == plain[1]["choices"][0]
    assert not [r for r in caplog.records if "unknown request fields" in r.getMessage()]


async def test_many_unknown_fields_are_one_line_and_a_bounded_memory(stack, caplog, monkeypatch):
    """A body with 5000 unknown keys wrote 5000 lines, and every new name was kept for good (the set only grew)."""
    client, _ = stack
    monkeypatch.setattr(openai_fields._unknown, "seen", set())
    with caplog.at_level(logging.WARNING, logger="sparkinfer.gateway"):
        status, body = await post(client, {**BASE, **{f"k{i}": i for i in range(5000)}})
        assert status == 200, body
        status, body = await post(client, {**BASE, "k_new": 1})
    lines = [r.getMessage() for r in caplog.records if "unknown request fields" in r.getMessage()]
    shown = ", ".join(repr(f"k{i}") for i in range(MAX_SHOWN))
    assert lines == [f"ignoring unknown request fields {shown} and {MAX_REMEMBERED - MAX_SHOWN} more (each name logged "
                     "once; no further names are logged)"]
    assert len(openai_fields._unknown.seen) == MAX_REMEMBERED


async def test_include_stop_str_in_output_streamed_and_not(stack):
    client, _ = stack
    body = {**BASE, "stop": ["wor"], "include_stop_str_in_output": True}
    status, out = await post(client, body)
    assert status == 200 and out["choices"][0]["message"]["content"] == "Hello wor"
    assert out["choices"][0]["finish_reason"] == "stop"
    assert await stream_text(client, body) == "Hello wor"
    assert await stream_text(client, {**body, "include_stop_str_in_output": False}) == "Hello "
    status, out = await post(client, {"model": "default", "prompt": "x", "stop": "l",
                                      "include_stop_str_in_output": True}, "/v1/completions")
    assert status == 200 and out["choices"][0]["text"] == "Hel"


@pytest.mark.parametrize("tool_choice,start", [(None, "start: (calls | %json{"), ("auto", "start: (calls | %json{"),
                                               ("required", "start: call"), ("none", "start: %json{")])
async def test_response_format_with_tools_is_a_call_or_the_json(stack, tool_choice, start):
    client, fake = stack
    rf = {"type": "json_schema", "json_schema": {"name": "o", "schema": {"type": "object"}}}
    status, body = await post(client, {**BASE, "tools": TOOLS, "tool_choice": tool_choice, "response_format": rf})
    assert status == 200, body
    grammar = fake.script.requests[0].constraint.grammar
    assert grammar.startswith(start) and ("<function=f>" in grammar) == (tool_choice != "none")


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
async def test_best_of_below_n_is_a_400_as_openai_and_vllm(stack, path):
    """best_of is the number of candidates the n answers are picked from, so best_of < n cannot be served (vLLM:
    "best_of must be greater than or equal to n"); it used to answer 200 on /v1/completions."""
    client, fake = stack
    base = {"model": "default", "prompt": "hi"} if path == "/v1/completions" else BASE
    status, body = await post(client, {**base, "n": 2, "best_of": 1}, path)
    assert status == 400 and body["error"]["param"] == "best_of" and body["error"]["code"] == "invalid_value"
    assert "greater than or equal to n" in body["error"]["message"] and not fake.script.requests
    status, body = await post(client, {**base, "n": 2, "best_of": 3}, path)
    assert status == 400 and body["error"]["code"] == "unsupported" and body["error"]["param"] == "best_of"
    status, body = await post(client, {**base, "n": 2, "best_of": 2, "max_tokens": 2}, path)
    assert status == 200 and len(body["choices"]) == 2


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions", "/v1/completions"])
@pytest.mark.parametrize("name,value", [("best_of", "two"), ("typical_p", "x"), ("length_penalty", [2]),
                                        ("modalities", "audio"), ("user", 5)])
async def test_refused_and_no_effect_fields_of_the_wrong_type_are_a_400(stack, path, name, value):
    """vLLM types these fields (pydantic), so a wrong type is its 400; here a string best_of and typical_p "x"
    reached the best_of < n and typical_p < 1 checks and were a 500 (TypeError: '<' not supported between 'str' and
    'int'), and modalities "audio" (not a list) was a 200 that asked for nothing."""
    client, fake = stack
    if name == "modalities" and path == "/v1/completions":
        pytest.skip("modalities is a chat field")
    base = {"model": "default", "prompt": "hi"} if path == "/v1/completions" else BASE
    status, body = await post(client, {**base, name: value}, path)
    assert status == 400, body
    assert body["error"]["param"] == name and body["error"]["code"] == "invalid_type"
    assert body["error"]["message"].startswith(f"invalid value for '{name}': ") and not fake.script.requests


@pytest.mark.parametrize("path,body", [(CHAT, BASE), ("/v1/completions", {"model": "default", "prompt": "hi"}),
                                       ("/v1/responses", {"model": "default", "input": "hi"})],
                         ids=["chat", "completions", "responses"])
async def test_an_empty_cache_salt_is_vllms_400(stack, path, body):
    # vLLM's check_cache_salt_support (chat, completions and Responses protocols) refuses "" in these words.
    client, fake = stack
    status, out = await post(client, {**body, "cache_salt": ""}, path)
    assert status == 400 and out["error"]["param"] == "cache_salt" and not fake.script.requests
    assert out["error"]["message"] == "Parameter 'cache_salt' must be a non-empty string if provided."
    status, _ = await post(client, {**body, "cache_salt": "s"}, path)
    assert status == 200


@pytest.mark.parametrize("path, body", [(CHAT, BASE), ("/v1/completions", {"model": "default", "prompt": "hi",
                                                                            "max_tokens": 4})], ids=["chat", "completions"])
async def test_an_empty_logprob_token_ids_is_vllms_400(stack, path, body):
    # vLLM's check_logprobs (chat_completion/protocol.py): "`logprob_token_ids` must not be an empty list."; an empty
    # list was taken here as no field (200).
    client, fake = stack
    status, got = await post(client, {**body, "logprobs": True, "logprob_token_ids": []}, path)
    assert status == 400 and got["error"]["param"] == "logprob_token_ids", got
    assert got["error"]["message"] == "`logprob_token_ids` must not be an empty list." and not fake.script.requests
