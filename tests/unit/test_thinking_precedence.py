"""Which thinking switch wins on the chat routes (fake scheduler): an explicit chat_template_kwargs.enable_thinking,
then reasoning_effort ("none" off, any other effort on), then the model's default (on). vLLM's build_chat_params
sets enable_thinking from reasoning_effort only when chat_template_kwargs lacks it; reasoning_effort "none" used to
turn thinking off over an explicit {"enable_thinking": true}."""
import pytest

REPLY = "Let me think.</think>\n\nHello world"
PATHS = ["/v1/chat/completions", "/api/v0/chat/completions"]
ON = {"content": "Hello world", "reasoning_content": "Let me think."}
# Thinking off: the prompt closes an empty think block, so everything the model writes is the answer.
OFF = {"content": REPLY, "reasoning_content": None}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("extra, expected", [
    ({"reasoning_effort": "none", "chat_template_kwargs": {"enable_thinking": True}}, ON),
    ({"reasoning": {"effort": "none"}, "chat_template_kwargs": {"enable_thinking": True}}, ON),
    ({"reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": False}}, OFF),
    ({"reasoning_effort": "none", "chat_template_kwargs": {"enable_thinking": None}}, OFF),
    ({"reasoning_effort": "none"}, OFF),
    ({"reasoning_effort": "low"}, ON),
    ({}, ON),
    # TabbyAPI's template_vars are its chat_template_kwargs (tabbyAPI#340: how its users turn Qwen3's thinking off); they
    # were ignored as an unknown field.
    ({"template_vars": {"enable_thinking": False}}, OFF),
    ({"template_vars": {"enable_thinking": False}, "chat_template_kwargs": {"enable_thinking": True}}, ON),
], ids=["none-vs-kwargs-on", "reasoning.effort-none-vs-kwargs-on", "high-vs-kwargs-off", "none-vs-kwargs-null",
        "none", "low", "default", "template-vars", "template-vars-under-kwargs"])
async def test_explicit_kwargs_then_effort_then_default(stack, path, extra, expected):
    client, fake = stack
    for stream in (False, True):
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 32, "stream": stream, **extra}
        response = await client.post(path, json=body)
        assert response.status == 200, await response.text()
        if stream:
            text = await response.text()
            assert ('"reasoning_content"' in text) == (expected["reasoning_content"] is not None), text
            continue
        message = (await response.json())["choices"][0]["message"]
        assert {key: message.get(key) for key in expected} == expected, message
    prompt = fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
    assert prompt.endswith("<think>\n\n</think>\n\n") == (expected is OFF), prompt
