"""Gateway /v1, /api/v0 and Ollama request checks: max_tokens order and wording, empty stops, tools (fake scheduler)."""
import re

import orjson
import pytest


USER = [{"role": "user", "content": "hi"}]
PROMPT = "Question: Is the sky blue? Answer: Yes"
WEATHER = {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
TOOLS = [{"type": "function", "function": WEATHER}]


async def post(client, path, body):
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


C11 = {"model": "default", "prompt": PROMPT, "echo": True, "logprobs": 1, "temperature": 0}


@pytest.mark.parametrize("max_tokens,code,message", [
    (10_000_000, "context_length_exceeded", "you requested 10000029 tokens (29 in the messages, 10000000 in the "
                                            "completion). Please reduce the length of the messages or completion. "
                                            "You requested 10000000 output tokens and your prompt contains at least "
                                            "29 input tokens, for a total of at least 10000029 tokens. With this "
                                            "prompt, max_tokens can be at most 2019."),
    (-1, "invalid_value", "max_tokens must be at least 1 (0 only with echo: true), got -1"),
    ("ten", "invalid_type", 'invalid value for \'max_tokens\': "ten" is not of type "integer", "null"'),
], ids=["beyond-context", "negative", "wrong-type"])
async def test_c11_max_tokens_is_checked_before_echo_with_logprobs(stack, max_tokens, code, message):
    client, _ = stack
    status, body = await post(client, "/v1/completions", {**C11, "max_tokens": max_tokens})
    assert status == 400 and body["error"]["param"] == "max_tokens" and body["error"]["code"] == code
    assert message in body["error"]["message"]


@pytest.mark.parametrize("max_tokens", [0, None, 4], ids=["prompt-only", "null", "four"])
async def test_c11_echo_with_logprobs_covers_the_prompt_when_max_tokens_is_fine(stack, max_tokens):
    client, fake = stack
    status, body = await post(client, "/v1/completions", {**C11, "max_tokens": max_tokens})
    assert status == 200, body
    logprobs = body["choices"][0]["logprobs"]
    num_prompt = len(fake.script.requests[-1].prompt_token_ids)
    assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
    assert "".join(logprobs["tokens"][:num_prompt]) == PROMPT
    assert body["choices"][0]["text"].startswith(PROMPT)
    if max_tokens == 0:
        assert body["choices"][0]["text"] == PROMPT and len(logprobs["tokens"]) == num_prompt
        assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 0


async def test_c11_null_max_tokens_is_the_completions_default(stack):
    # vLLM's normalize_null_max_tokens (#45491): an explicit null is OpenAI's default of 16 on completions, as an
    # absent one; before, it ran up to the context (2019 tokens here). Chat's null stays no explicit limit.
    client, fake = stack
    body = {key: value for key, value in C11.items() if key != "logprobs"}
    status, out = await post(client, "/v1/completions", {**body, "max_tokens": None})
    assert status == 200 and out["choices"][0]["text"] == PROMPT + "Hello world"
    assert fake.script.requests[-1].max_tokens == 16
    status, out = await post(client, "/v1/completions", {"prompt": PROMPT})
    assert status == 200 and fake.script.requests[-1].max_tokens == 16
    status, out = await post(client, "/v1/chat/completions", {"messages": USER, "max_tokens": None,
                                                              "enable_thinking": False})
    assert status == 200 and out["choices"][0]["message"]["content"] == "Hello world"


@pytest.mark.parametrize("path,field,value,message", [
    ("/v1/chat/completions", "max_tokens", -1, "max_tokens must be at least 1, got -1"),
    ("/v1/chat/completions", "max_tokens", 0, "max_tokens must be at least 1, got 0"),
    ("/v1/chat/completions", "max_completion_tokens", -5, "max_completion_tokens must be at least 1, got -5"),
    ("/v1/chat/completions", "max_completion_tokens", 0, "max_completion_tokens must be at least 1, got 0"),
    ("/v1/completions", "max_tokens", -1, "max_tokens must be at least 1 (0 only with echo: true), got -1"),
    ("/v1/completions", "max_tokens", 0, "max_tokens must be at least 1 (0 only with echo: true), got 0"),
    ("/api/v0/chat/completions", "max_tokens", 0, "max_tokens must be at least 1, got 0"),
    ("/api/v0/chat/completions", "max_tokens", -2, "max_tokens must be at least 1, got -2"),
])
async def test_one_message_per_token_limit_field(stack, path, field, value, message):
    client, _ = stack
    body = {"messages": USER} if "chat" in path else {"prompt": "hi"}
    status, out = await post(client, path, {**body, field: value})
    assert status == 400 and out["error"] == {"message": message, "type": "invalid_request_error",
                                              "param": field, "code": "invalid_value"}


EMPTY_STOPS = pytest.mark.parametrize("stop", ["", [""], ["", ""], ["", "zzz"]],
                                      ids=["empty", "list-empty", "two-empty", "empty-and-other"])


@EMPTY_STOPS
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
async def test_an_empty_stop_string_is_vllms_400_on_v1(stack, path, stop):
    # vLLM's SamplingParams._verify_args: "stop cannot contain an empty string." (it would match at once).
    client, fake = stack
    body = {"messages": USER} if "chat" in path else {"prompt": "hi"}
    status, out = await post(client, path, {**body, "stop": stop, "max_tokens": 8})
    assert status == 400 and out == {"error": {"message": "stop cannot contain an empty string.",
                                               "type": "invalid_request_error", "param": "stop",
                                               "code": "invalid_value"}}
    assert not fake.script.requests


@pytest.mark.parametrize("stop", ["", [""], ["", ""], ["", "zzz"], None, []],
                         ids=["empty", "list-empty", "two-empty", "empty-and-other", "null", "no-list"])
# /v1/messages' stop_sequences refuses an empty one, as Anthropic does (test_anthropic_errors.py).
@pytest.mark.parametrize("path", ["/api/v0/chat/completions", "/api/chat", "/api/generate"])
async def test_empty_stop_strings_are_dropped_as_no_ops_elsewhere(stack, path, stop):
    client, _ = stack
    if path.startswith("/api/") and not path.startswith("/api/v0/"):
        key = "messages" if path == "/api/chat" else "prompt"
        # Ollama's options.stop is an array ([]string): a lone string is its 400 (test_ollama_stop_string.py).
        stop = [stop] if isinstance(stop, str) else stop
        body = {"model": "default", key: USER if key == "messages" else "hi", "stream": False, "think": False,
                "options": {"stop": stop}}
    else:
        body = {"messages": USER, "stop": stop, "max_tokens": 8, "enable_thinking": False}
    status, out = await post(client, path, body)
    assert status == 200, out
    text = out.get("response") or (out.get("message") or {}).get("content") or \
        (out.get("content") or [{}])[0].get("text") or out["choices"][0]["message"]["content"]
    assert text == "Hello world"


@pytest.mark.parametrize("name", ["a b<tool_call>\"", "", "a>b", "a\nb"],
                         ids=["markup", "empty", "angle", "line-break"])
async def test_tool_names_that_could_break_markup_are_400(stack, name):
    # any other name is served, as vLLM and Ollama take it (tests/unit/test_anthropic_tool_names.py)
    client, _ = stack
    status, out = await post(client, "/v1/chat/completions",
                             {"messages": USER, "tools": [{"type": "function", "function": {"name": name}}]})
    assert status == 400 and out["error"]["param"].startswith("tools[0].function.name")
    status, out = await post(client, "/api/chat", {"model": "default", "messages": USER, "stream": False,
                                                   "tools": [{"type": "function", "function": {"name": name}}]})
    assert status == 400 and set(out) == {"error"}


@pytest.mark.parametrize("name", ["github.create_issue", "fs:read", "get-weather_2"], ids=["dot", "colon", "dash"])
async def test_mcp_style_tool_names_are_accepted(stack, name):
    client, fake = stack
    tools = [{"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}]
    status, out = await post(client, "/v1/chat/completions", {"messages": USER, "tools": tools})
    assert status == 200, out
    status, out = await post(client, "/api/chat", {"model": "default", "messages": USER, "stream": False,
                                                   "tools": tools})
    assert status == 200, out


async def test_a_tool_message_without_tool_call_id_is_read_as_vllm_reads_it(stack):
    # vLLM's ChatCompletionToolMessageParam, SGLang, llama.cpp and Ollama's /v1 take a tool message without
    # tool_call_id (clients written against them send it so; Qwen's template never shows the id): the prompt is the
    # one with the id. OpenAI alone refuses it.
    client, fake = stack
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    turns = USER + [{"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "content": "sunny"}]
    with_id = turns[:2] + [{**turns[2], "tool_call_id": "call_1"}]
    for path in ("/v1/chat/completions", "/api/v0/chat/completions"):
        prompts = []
        for messages in (turns, with_id):
            status, out = await post(client, path, {"messages": messages, "tools": TOOLS})
            assert status == 200, out
            prompts.append(list(fake.script.requests[-1].prompt_token_ids))
        assert prompts[0] == prompts[1]
    ollama = USER + [{"role": "assistant", "content": "", "tool_calls": [call]},
                     {"role": "tool", "content": "sunny", "tool_name": "get_weather"}]
    status, _ = await post(client, "/api/chat", {"model": "default", "messages": ollama, "stream": False})
    assert status == 200


async def test_legacy_functions_become_tools(stack):
    client, fake = stack
    await post(client, "/v1/chat/completions", {"messages": USER, "tools": TOOLS})
    with_tools = list(fake.script.requests[-1].prompt_token_ids)
    status, _ = await post(client, "/v1/chat/completions", {"messages": USER, "functions": [WEATHER]})
    assert status == 200 and list(fake.script.requests[-1].prompt_token_ids) == with_tools
    status, _ = await post(client, "/v1/chat/completions",
                           {"messages": USER, "functions": [WEATHER], "function_call": "auto"})
    assert status == 200 and list(fake.script.requests[-1].prompt_token_ids) == with_tools
    # "none" keeps the tools in the prompt (vLLM >= 0.10); only their calls are not parsed.
    status, _ = await post(client, "/v1/chat/completions",
                           {"messages": USER, "functions": [WEATHER], "function_call": "none"})
    assert status == 200 and list(fake.script.requests[-1].prompt_token_ids) == with_tools


@pytest.mark.parametrize("extra,param,message", [
    ({"tools": TOOLS}, "functions", "use either tools/tool_choice or the deprecated functions/function_call"),
    ({"function_call": {"name": "nope"}}, "function_call", "names the function 'nope', which is not in functions"),
    ({"functions": [{"name": "bad>name"}]}, "functions[0].name", "'bad>name' cannot be written in the model's tool"),
    ({"function_call": 5}, "function_call", "invalid value for 'function_call'"),
], ids=["both", "unknown-named", "bad-name", "bad-type"])
async def test_legacy_functions_errors(stack, extra, param, message):
    client, _ = stack
    body = {"messages": USER, "functions": [WEATHER], **extra}
    status, out = await post(client, "/v1/chat/completions", body)
    assert status == 400 and out["error"]["param"] == param and message in out["error"]["message"]


@pytest.mark.parametrize("prompt,message,param", [
    ("", "Either prompt or prompt_embeds must be provided and non-empty.", "prompt"),
    (["a", ""], "The decoder prompt cannot be empty", "prompt[1]"),
], ids=["whole", "one of several"])
async def test_an_empty_prompt_is_vllms_400(stack, prompt, message, param):
    # vLLM's words: CompletionRequest.validate_prompt_and_prompt_embeds for "", its engine's input check for an
    # empty prompt among several (there without a param; here the element is named).
    client, fake = stack
    status, out = await post(client, "/v1/completions", {"model": "default", "prompt": prompt})
    assert status == 400 and out["error"]["message"] == message and out["error"]["param"] == param
    assert not fake.script.requests


@pytest.mark.parametrize("body", [{"prompt_embeds": "AAAA"}, {"prompt": None, "prompt_embeds": ["AAAA"]}],
                         ids=["no-prompt", "null-prompt"])
async def test_prompt_embeds_alone_is_refused_by_name(stack, body):
    # vLLM's documented form sends prompt_embeds without a prompt (its CompletionRequest.prompt defaults to None);
    # before, the schema answered first: "'prompt' is a required property" (or "null is not of type"), naming the
    # field the client rightly left out instead of the one this server does not serve.
    client, fake = stack
    status, out = await post(client, "/v1/completions", {"model": "default", **body})
    assert status == 400 and out["error"]["param"] == "prompt_embeds" and out["error"]["code"] == "unsupported"
    assert "prompt embeddings are not supported" in out["error"]["message"] and not fake.script.requests


# What clients parse from vLLM's refusal to shrink max_tokens or trim history, with the groups holding (context,
# prompt, max_tokens): its older sentence (OpenAI's, vllm#20409) and its current one (vllm#36197), as agents' regexes
# read them (hermes-agent, opencode, Go clients).
@pytest.mark.parametrize("pattern, groups", [
    (r"maximum context length is (\d+) tokens.*requested \d+ tokens \((\d+) in the messages, (\d+) in the completion\)",
     (1, 2, 3)),
    (r"maximum context length is (\d+) tokens.*?requested (\d+) output tokens.*?at least (\d+) input tokens", (1, 3, 2)),
], ids=["messages-completion", "output-input"])
async def test_past_the_context_is_parsed_by_clients_of_vllm(stack, pattern, groups):
    """The counts read back from the message are the request's; it said "(29 in the prompt, ...)" before, which
    neither pattern reads."""
    client, fake = stack
    status, body = await post(client, "/v1/chat/completions", {"model": "default", "max_tokens": 5000,
                                                               "messages": [{"role": "user", "content": "hi"}]})
    found = re.search(pattern, body["error"]["message"])
    assert status == 400 and found is not None, body
    ctx, num_prompt, max_tokens = (int(found[i]) for i in groups)
    assert (ctx, max_tokens) == (2048, 5000) and 0 < num_prompt < 100
