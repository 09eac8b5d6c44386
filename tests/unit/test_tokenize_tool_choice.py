"""/tokenize (vLLM's chat form) counts the prompt /v1/chat/completions renders for the same body, tool_choice included:
a forced tool_choice (required or a named function) turns the thinking off in the chat's prompt (an empty think block
after the generation prompt), and /tokenize rendered it without, 4 tokens fewer than the chat's prompt_tokens on the
served template. /apply-template and /detokenize of the ids give that same prompt text."""
import orjson
import pytest

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
BODY = {"model": "default", "messages": [{"role": "user", "content": "weather in Paris?"}], "tools": TOOLS}
CHOICES = {"required": "required", "named": {"type": "function", "function": {"name": "get_weather"}},
           "auto": "auto", "none": "none", "unset": None}


async def post(client, path: str, body: dict) -> dict:
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    return orjson.loads(await response.read())


@pytest.mark.parametrize("thinking", [None, False], ids=["thinking-default", "thinking-off"])
@pytest.mark.parametrize("choice", CHOICES.values(), ids=CHOICES.keys())
async def test_the_count_is_the_chat_prompt(stack, choice, thinking):
    client, _ = stack
    body = {**BODY, **({"tool_choice": choice} if choice is not None else {}),
            **({"chat_template_kwargs": {"enable_thinking": thinking}} if thinking is not None else {})}
    tokenized = await post(client, "/tokenize", body)
    chat = await post(client, "/v1/chat/completions", {**body, "max_tokens": 1, "return_prompt_text": True})
    assert tokenized["count"] == chat["usage"]["prompt_tokens"] == len(tokenized["tokens"])
    text = (await post(client, "/detokenize", {"model": "default", "tokens": tokenized["tokens"]}))["prompt"]
    assert text == chat["prompt_text"] == (await post(client, "/apply-template", body))["prompt"]
    forced = choice in ("required", CHOICES["named"])
    assert text.endswith("<think>\n\n</think>\n\n") == (forced or thinking is False)


@pytest.mark.parametrize("field, value", [("reasoning", 5), ("reasoning_effort", 7), ("tool_choice", {}),
                                          ("tool_choice", {"type": "function"})],
                         ids=["reasoning-int", "effort-int", "choice-empty", "choice-no-function"])
@pytest.mark.parametrize("path", ["/tokenize", "/apply-template", "/v1/score"])
async def test_the_rendered_fields_are_typed_as_on_chat(stack, path, field, value):
    """The fields the rendering reads are typed as the chat route types them, a 400 naming the field: untyped,
    `reasoning: 5` was an AttributeError and `tool_choice: {}` a KeyError, a 500 on each route."""
    client, _ = stack
    body = {**BODY, "completion": "yes", field: value}
    response = await client.post(path, data=orjson.dumps(body))
    error = orjson.loads(await response.read())["error"]
    chat = await client.post("/v1/chat/completions", data=orjson.dumps({**BODY, field: value}))
    assert response.status == chat.status == 400, error
    assert error["message"] == orjson.loads(await chat.read())["error"]["message"]
    assert field in error["message"]
