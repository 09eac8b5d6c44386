"""Ollama /api/chat: Continue's `thinking` messages (a turn's reasoning, sent before that turn's assistant message in
every later request: ollama/ollama#14202) are read as that assistant message's thinking, instead of a 400 on the
second turn of every chat with a thinking model. Ollama's Qwen3.5 renderer answers such a history 200."""
import pytest

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
CALL = [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]


async def _rendered(client, messages: list, **extra) -> str:
    body = {"model": "fake-model", "messages": messages, "_debug_render_only": True, **extra}
    response = await client.post("/api/chat", json=body)
    answer = await response.json()
    assert response.status == 200, answer
    return answer["_debug_info"]["rendered_template"]


async def test_continues_second_turn_is_answered(fake):
    """Continue's history after one answer of a thinking model: user, thinking, assistant, user."""
    client, servicer = fake
    servicer.script.reply = "Fine."
    messages = [{"role": "user", "content": "Hi"}, {"role": "thinking", "content": "The user greets me."},
                {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "How are you?"}]
    response = await client.post("/api/chat", json={"model": "fake-model", "messages": messages, "think": False,
                                                     "stream": False})
    answer = await response.json()
    assert response.status == 200, answer
    assert answer["message"]["content"] == "Fine."
    folded = messages[:1] + [{"role": "assistant", "content": "Hello!", "thinking": "The user greets me."}] + messages[3:]
    assert await _rendered(client, messages) == await _rendered(client, folded)


async def test_the_thinking_of_a_turn_still_in_progress_reaches_the_prompt(fake):
    """An agent's turn calling a tool keeps its reasoning in the prompt (the template replays it after the last user
    message), so the thinking message is not dropped there."""
    client, _ = fake
    messages = [{"role": "user", "content": "Weather in Paris?"}, {"role": "thinking", "content": "Call the tool."},
                {"role": "assistant", "content": "", "tool_calls": CALL},
                {"role": "tool", "tool_name": "get_weather", "content": "sunny"}]
    prompt = await _rendered(client, messages, tools=TOOLS)
    assert "Call the tool." in prompt
    own = [messages[0], {**messages[2], "thinking": "Call the tool."}, messages[3]]
    assert prompt == await _rendered(client, own, tools=TOOLS)


@pytest.mark.parametrize("tail", [[{"role": "user", "content": "And now?"}], []])
async def test_a_thinking_message_no_assistant_follows_is_left_out(fake, tail):
    client, _ = fake
    head = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!", "thinking": "Mine."}]
    with_thought = head + [{"role": "thinking", "content": "Stray thought."}] + tail
    assert await _rendered(client, with_thought) == await _rendered(client, head + tail)


async def test_an_assistant_messages_own_thinking_wins(fake):
    client, _ = fake
    own = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!", "thinking": "Mine."},
           {"role": "user", "content": "Again"}]
    sent = own[:1] + [{"role": "Thinking", "content": "Other."}] + own[1:]
    assert await _rendered(client, sent) == await _rendered(client, own)
