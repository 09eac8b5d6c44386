"""Unit tests: how an earlier assistant turn comes back into the prompt on every chat surface (its reasoning under
any of the names clients use, a final message left open with continue_final_message), compared with
transformers' apply_chat_template on the same messages."""
import copy
import json

import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway, read_template

SOURCE = read_template()
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    fake.script.reply = "ok"
    async with fake_gateway(fake) as pair:
        yield pair


async def prompt_of(client, fake, path: str, body: dict) -> str:
    """The prompt text the gateway sent the scheduler for one request (after checking the answer is a 200)."""
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


def transformers_render(messages: list, **kwargs) -> str:
    """transformers' render of OpenAI messages, tool-call arguments as dicts as vLLM hands them over."""
    chat_utils = pytest.importorskip("transformers.utils.chat_template_utils")
    messages = copy.deepcopy(messages)
    for message in messages:
        for call in message.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    rendered, _ = chat_utils.render_jinja_template(conversations=[messages], chat_template=SOURCE, **kwargs)
    return rendered[0]


def tool_turn(field: str) -> list:
    """A tool round trip after the last user query; the assistant's reasoning sent back under `field`."""
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                             "arguments": '{"city": "Paris", "days": 2}'}}
    return [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "Sunny.", field: "old thought"},
            {"role": "user", "content": "And in Paris?"},
            {"role": "assistant", "content": None, field: "I need the tool.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "rain"}]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions"])
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "thinking"])
async def test_reasoning_sent_back_under_any_name_is_replayed(stack, path, field):
    # Clients send an earlier turn's reasoning as reasoning_content (vLLM), reasoning (OpenRouter, vLLM >= 0.10) or
    # thinking (Ollama-style clients); transformers aliases the three. `thinking` was dropped: the turn in the tool
    # chain rendered an empty think block.
    client, fake = stack
    messages = tool_turn(field)
    prompt = await prompt_of(client, fake, path, {"model": "fake-model", "messages": messages, "tools": TOOLS,
                                                  "max_tokens": 1})
    assert "<think>\nI need the tool.\n</think>\n\n<tool_call>\n<function=get_weather>" in prompt
    assert "old thought" not in prompt          # before the last user query: dropped, as the template does
    assert prompt == transformers_render(messages, tools=TOOLS, add_generation_prompt=True)


async def test_assistant_turn_with_only_thinking_is_accepted(stack):
    client, fake = stack
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "thinking": "hmm"}]
    prompt = await prompt_of(client, fake, "/v1/chat/completions", {"model": "fake-model", "messages": messages,
                                                                     "max_tokens": 1})
    assert prompt.endswith("<|im_start|>assistant\n<think>\nhmm\n</think>\n\n<|im_end|>\n"
                           "<|im_start|>assistant\n<think>\n")


async def test_thinking_that_is_not_a_string_is_a_400(stack):
    client, _ = stack
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "thinking": 3}]
    response = await client.post("/v1/chat/completions", json={"model": "fake-model", "messages": messages})
    body = await response.json()
    assert response.status == 400 and body["error"]["param"] == "messages[1].thinking"


CONTINUED = ["The answer is ", "Line one\n", "  padded", "x <think>y"]


@pytest.mark.parametrize("final", CONTINUED, ids=["trailing-space", "trailing-newline", "leading-space", "think-tag"])
async def test_continue_final_message_cuts_where_transformers_does(stack, final):
    # The template trims an assistant message, so its text is not found verbatim: a 400 before.
    client, fake = stack
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": final}]
    prompt = await prompt_of(client, fake, "/v1/chat/completions",
                             {"model": "fake-model", "messages": messages, "continue_final_message": True,
                              "add_generation_prompt": False, "max_tokens": 1})
    assert prompt == transformers_render(messages, continue_final_message=True)
    assert prompt.endswith(final.strip())


async def test_prefill_the_template_trims_continues_on_ollama_and_anthropic(stack):
    # Anthropic refuses trailing whitespace in a prefill itself; a leading space is allowed there.
    client, fake = stack
    ollama = await prompt_of(client, fake, "/api/chat", {
        "model": "fake-model", "stream": False, "options": {"num_predict": 1},
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Sure, "}]})
    anthropic = await prompt_of(client, fake, "/v1/messages", {
        "model": "fake-model", "max_tokens": 1,
        "messages": [{"role": "user", "content": "q"},
                     {"role": "assistant", "content": [{"type": "text", "text": " Sure,"}]}]})
    assert ollama.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\nSure,")
    assert anthropic.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\nSure,")
