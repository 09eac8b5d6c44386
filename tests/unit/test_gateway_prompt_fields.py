"""/v1 prompt shaping fields (fake scheduler): add_generation_prompt, continue_final_message, chat_template and
truncate_prompt_tokens change the prompt the scheduler gets, and the reported prompt_tokens."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

CHAT = "/v1/chat/completions"
BASE = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "enable_thinking": False,
        "max_tokens": 4}
OPEN = [{"role": "user", "content": "Tell a story"}, {"role": "assistant", "content": "Once upon a"}]


async def prompt_of(client, fake, body, path=CHAT) -> tuple[str, dict]:
    response = await client.post(path, data=orjson.dumps(body))
    out = orjson.loads(await response.read())
    assert response.status == 200, out
    ids = list(fake.script.requests[-1].prompt_token_ids)
    assert out["usage"]["prompt_tokens"] == len(ids)
    return fake.tokenizer.decode(ids, skip_special_tokens=False), out


async def error_of(client, body, path=CHAT) -> dict:
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 400
    return orjson.loads(await response.read())["error"]


async def test_add_generation_prompt_false_leaves_the_assistant_turn_unopened(stack):
    client, fake = stack
    with_prompt, _ = await prompt_of(client, fake, BASE)
    without, _ = await prompt_of(client, fake, {**BASE, "add_generation_prompt": False})
    assert with_prompt.startswith(without) and without.endswith("hi<|im_end|>\n")
    assert "<|im_start|>assistant" in with_prompt[len(without):]


async def test_continue_final_message_leaves_the_last_assistant_message_open(stack):
    client, fake = stack
    body = {**BASE, "messages": OPEN, "continue_final_message": True, "add_generation_prompt": False}
    text, out = await prompt_of(client, fake, body)
    # The template renders the last assistant turn as it always does (here with an empty think block), unclosed.
    assert text.endswith("Once upon a") and text.count("<|im_start|>assistant\n") == 1
    assert text.index("<|im_start|>assistant\n") > text.index("Tell a story<|im_end|>")
    assert out["choices"][0]["message"]["content"] == "Hello world"
    implicit, _ = await prompt_of(client, fake, {key: v for key, v in body.items() if key != "add_generation_prompt"})
    assert implicit == text


CALLS = [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]


@pytest.mark.parametrize("tail,prompt_end", [
    ([{"role": "user", "content": "Complete this: The quick brown"}],
     "hi<|im_end|>\n<|im_start|>user\nComplete this: The quick brown"),
    ([{"role": "assistant", "content": "", "tool_calls": CALLS},
      {"role": "tool", "tool_call_id": "call_1", "content": "result 42"}],
     "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nresult 42"),
], ids=["user", "tool"])
@pytest.mark.parametrize("path", [CHAT, "/api/v0/chat/completions"])
async def test_continue_final_message_leaves_any_last_message_open(stack, tail, prompt_end, path):
    """transformers' apply_chat_template continues whatever message is last (vLLM passes the flag to it); a final
    user message was a 400 'continue_final_message needs the last message to be the assistant's'."""
    client, fake = stack
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}, *tail]
    body = {**BASE, "messages": messages, "continue_final_message": True, "add_generation_prompt": False}
    prompt, out = await prompt_of(client, fake, body, path)
    assert prompt.endswith(prompt_end) and out["choices"][0]["message"]["content"] == "Hello world"
    tokenized = orjson.loads(await (await client.post("/v1/tokenize", data=orjson.dumps(body))).read())
    assert tokenized["tokens"] == list(fake.script.requests[-1].prompt_token_ids)


@pytest.mark.parametrize("change,message", [
    ({"messages": OPEN, "continue_final_message": True, "add_generation_prompt": True},
     "Cannot set both `continue_final_message` and `add_generation_prompt` to True."),
    ({"messages": [OPEN[0], {"role": "assistant", "content": None, "tool_calls": CALLS}],
      "continue_final_message": True},
     "continue_final_message needs the last message (assistant) to have content to continue"),
], ids=["both-true", "no-content"])
@pytest.mark.parametrize("path", [CHAT, "/api/v0/chat/completions", "/v1/tokenize"])
async def test_continue_final_message_errors(stack, change, message, path):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**BASE, **change}))
    error = orjson.loads(await response.read())["error"]
    assert response.status == 400 and error == {"message": message, "type": "invalid_request_error",
                                                "param": "continue_final_message", "code": "invalid_value"}
    assert not fake.script.requests


@pytest.fixture
async def trusted():
    """The stack with request chat templates trusted (SPARKINFER_TRUST_REQUEST_CHAT_TEMPLATE=1)."""
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    async with fake_gateway(fake, trust_request_chat_template=True) as pair:
        yield pair


@pytest.mark.parametrize("fields", [{"add_generation_prompt": False}, {"continue_final_message": True},
                                    {"chat_template": "{% for m in messages %}[{{ m.content }}]{% endfor %}"}],
                         ids=["no-generation-prompt", "continue", "chat-template"])
async def test_tokenize_counts_the_prompt_the_chat_request_gets(trusted, fields):
    client, fake = trusted
    body = {**BASE, "messages": OPEN, **fields}
    await prompt_of(client, fake, body)
    response = await client.post("/v1/tokenize", data=orjson.dumps(body))
    out = orjson.loads(await response.read())
    assert response.status == 200 and out["tokens"] == list(fake.script.requests[-1].prompt_token_ids)


async def test_chat_template_override_renders_the_prompt(trusted):
    client, fake = trusted
    text, _ = await prompt_of(client, fake, {**BASE, "chat_template": "{% for m in messages %}[{{ m.content }}]"
                                                                      "{% endfor %}"})
    assert text == "[hi]"


@pytest.mark.parametrize("template,message", [("{% for %}", "chat_template does not compile"),
                                              ("{{ raise_exception('no system') }}", "no system"),
                                              ("{{ messages.nope.x }}", "chat_template"),
                                              ("{% if 1 %}" * 100 + "{% endif %}" * 100, "does not compile"),
                                              ("{% if 1 %}" * 2000 + "{% endif %}" * 2000, "does not compile"),
                                              ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
                                               "could not render these messages: maximum recursion depth")],
                         ids=["syntax", "raise", "undefined", "nested-100", "nested-2000", "recursive-macro"])
async def test_chat_template_errors_are_400(trusted, template, message):
    client, fake = trusted
    error = await error_of(client, {**BASE, "chat_template": template})
    assert error["param"] == "chat_template" and message in error["message"] and not fake.script.requests


async def test_truncate_prompt_tokens_keeps_the_last_tokens(stack):
    client, fake = stack
    full, _ = await prompt_of(client, fake, BASE)
    full_ids = list(fake.script.requests[-1].prompt_token_ids)
    text, out = await prompt_of(client, fake, {**BASE, "truncate_prompt_tokens": 4})
    assert list(fake.script.requests[-1].prompt_token_ids) == full_ids[-4:] and out["usage"]["prompt_tokens"] == 4
    assert full.endswith(text)
    _, out = await prompt_of(client, fake, {"model": "default", "prompt": "one two three four five",
                                            "truncate_prompt_tokens": 2}, "/v1/completions")
    assert out["usage"]["prompt_tokens"] == 2


async def test_truncate_prompt_tokens_zero_is_a_400(stack):
    client, _ = stack
    error = await error_of(client, {**BASE, "truncate_prompt_tokens": 0})
    assert error["param"] == "truncate_prompt_tokens" and "at least 1" in error["message"]


NO_LIMIT = {key: value for key, value in BASE.items() if key != "max_tokens"}


@pytest.mark.parametrize("path,body,room,param", [
    (CHAT, {**BASE, "truncate_prompt_tokens": 2045}, 2044, "max_tokens"),
    (CHAT, {**NO_LIMIT, "max_completion_tokens": 48, "truncate_prompt_tokens": 2001}, 2000, "max_completion_tokens"),
    (CHAT, {**NO_LIMIT, "truncate_prompt_tokens": 2049}, 2048, "max_tokens"),
    ("/v1/completions", {"prompt": "hi", "truncate_prompt_tokens": 2033}, 2032, "max_tokens"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": None, "truncate_prompt_tokens": 4096}, 2032, "max_tokens"),
], ids=["chat-max-tokens", "chat-max-completion-tokens", "chat-no-limit", "completions-default-16", "completions-null"])
async def test_truncate_prompt_tokens_past_the_room_is_vllms_400(stack, path, body, room, param):
    client, fake = stack
    error = await error_of(client, body, path)
    keep = body["truncate_prompt_tokens"]
    assert error["message"] == (f"truncate_prompt_tokens={keep} cannot be greater than max_model_len - {param} = "
                                f"{room}. Please request a smaller truncation size.")
    assert error["param"] == "truncate_prompt_tokens" and not fake.script.requests


async def test_truncate_prompt_tokens_up_to_the_room_is_accepted(stack):
    client, fake = stack
    _, out = await prompt_of(client, fake, {**BASE, "truncate_prompt_tokens": 2044})
    assert out["choices"][0]["finish_reason"] in ("stop", "length")


async def test_truncate_prompt_tokens_minus_one_keeps_what_fits(stack):
    """-1 keeps as many prompt tokens as fit beside the requested output (vLLM's max_input_tokens), from the left."""
    client, fake = stack
    long_chat = {**BASE, "messages": [{"role": "user", "content": "story " * 3000}], "truncate_prompt_tokens": -1}
    text, out = await prompt_of(client, fake, long_chat)
    assert out["usage"]["prompt_tokens"] == 2048 - 4 and text.endswith("assistant\n<think>\n\n</think>\n\n")
    ids = [100 + i % 50 for i in range(3000)]
    _, out = await prompt_of(client, fake, {"model": "default", "prompt": ids, "max_tokens": 8,
                                            "truncate_prompt_tokens": -1}, "/v1/completions")
    assert out["usage"]["prompt_tokens"] == 2040 and list(fake.script.requests[-1].prompt_token_ids) == ids[-2040:]
    _, out = await prompt_of(client, fake, {**BASE, "truncate_prompt_tokens": -1})
    assert out["usage"]["prompt_tokens"] < 20
