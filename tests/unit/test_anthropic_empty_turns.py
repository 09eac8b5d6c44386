"""Anthropic /v1/messages and count_tokens (fake scheduler): a turn with nothing in it (content "", [], empty text
blocks, a redacted thinking block alone) is an empty turn of its role, as vLLM's Anthropic layer renders content ""
(vllm/entrypoints/anthropic/serving.py _convert_messages) and Ollama's drops it (anthropic/anthropic.go convertMessage)
instead of refusing it. It was Anthropic's 400 "messages.N: all messages must have non-empty content except for the
optional final assistant message", which Claude Code has hit (anthropics/claude-code#4416, #60009): the empty turn is
replayed with every later request, so the conversation could not go on."""
import pytest

EMPTY = {"user string": ("user", ""), "user list": ("user", []),
         "user empty text": ("user", [{"type": "text", "text": ""}]),
         "assistant empty text": ("assistant", [{"type": "text", "text": ""}]),
         "assistant redacted thinking": ("assistant", [{"type": "redacted_thinking", "data": "abc"}])}


def prompt_of(fake) -> str:
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


def conversation(role: str, content) -> list:
    """The empty turn between two turns of the other role, as a client replays it."""
    other = "assistant" if role == "user" else "user"
    return [{"role": "user", "content": "Hi"}, {"role": other, "content": "one"}, {"role": role, "content": content},
            {"role": "user", "content": "Again"}][0 if role == "user" else 1:]


@pytest.mark.parametrize("name", list(EMPTY))
async def test_an_empty_turn_renders_as_an_empty_turn_of_its_role(stack, name):
    client, fake = stack
    role, content = EMPTY[name]
    messages = conversation(role, content)
    body = {"model": "fake-model", "max_tokens": 8, "thinking": {"type": "disabled"}, "messages": messages}
    response = await client.post("/v1/messages", json=body)
    assert response.status == 200, await response.text()
    answer = await response.json()
    rendered = prompt_of(fake)
    # The same conversation on /v1/chat/completions, the empty turn as content "".
    chat = [{**message, "content": message["content"] if isinstance(message["content"], str) else ""}
            for message in messages]
    openai = {"model": "fake-model", "max_tokens": 8, "messages": chat, "enable_thinking": False}
    assert (await client.post("/v1/chat/completions", json=openai)).status == 200
    assert rendered == prompt_of(fake)
    assert f"one<|im_end|>\n<|im_start|>{role}\n" in rendered
    counted = await (await client.post("/v1/messages/count_tokens", json=body)).json()
    assert counted["input_tokens"] == answer["usage"]["input_tokens"]


async def test_a_final_empty_user_turn_is_answered_not_a_prefill(stack):
    """Dropping it instead would make the assistant turn before it the final one, continued as a prefill."""
    client, fake = stack
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": ""}]
    body = {"model": "fake-model", "max_tokens": 8, "thinking": {"type": "disabled"}, "messages": messages,
            "stream": True}
    response = await client.post("/v1/messages", json=body)
    assert response.status == 200, await response.text()
    await response.read()
    assert prompt_of(fake).endswith("Hello<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n"
                                    "<think>\n\n</think>\n\n")
