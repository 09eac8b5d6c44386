"""A final assistant message of reasoning alone (content "", the thinking under reasoning_content, reasoning or thinking)
is continued after its thinking: /v1's continue_final_message and Anthropic's prefill cut the prompt as transformers'
apply_chat_template(continue_final_message=True) cuts it (after the template's </think>, the blank line after it
stripped), Ollama's /api/chat prefill leaves the turn open after the template's </think> and its blank line, as
Ollama's Qwen3.5 renderer leaves a final assistant message open (model/renderers/qwen35.go: prefill is the last message
being the assistant's) and as its two-pass structured output re-renders the thinking it got. The reasoning was dropped
(/v1: the prompt was a fresh generation prompt) or the turn closed and a new one opened (/api/chat), so the model
thought again instead of answering after the thinking the client gave it. An empty final turn is continued so too."""
import json

import pytest

REPLY = "The answer is 391."
USER = {"role": "user", "content": "17*23?"}
OPEN = "<|im_start|>user\n17*23?<|im_end|>\n<|im_start|>assistant\n<think>\n17*23 = 391.\n</think>\n\n"
CUT = OPEN.rstrip()   # transformers' cut: the text before its tag, right-stripped where the template trimmed it


def prompt_of(fake) -> str:
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "thinking"])
@pytest.mark.parametrize("content", ["", []], ids=["empty string", "no parts"])
async def test_v1_continues_after_the_thinking(stack, field, content):
    client, fake = stack
    body = {"messages": [USER, {"role": "assistant", "content": content, field: "17*23 = 391."}],
            "continue_final_message": True, "add_generation_prompt": False}
    message = (await (await client.post("/v1/chat/completions", json=body)).json())["choices"][0]["message"]
    assert prompt_of(fake) == CUT
    assert (message["content"], message["reasoning_content"]) == (REPLY, None)
    streamed = await (await client.post("/v1/chat/completions", json={**body, "stream": True})).text()
    deltas = [c["delta"] for line in streamed.splitlines() if line.startswith("data: {")
              for c in json.loads(line[6:])["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == REPLY
    assert not any(d.get("reasoning_content") for d in deltas)
    counted = await (await client.post("/v1/tokenize", json=body)).json()
    assert counted["tokens"] == list(fake.script.requests[-1].prompt_token_ids)


async def test_ollama_chat_continues_after_the_thinking(stack):
    client, fake = stack
    body = {"model": "fake-model", "stream": False,
            "messages": [USER, {"role": "assistant", "content": "", "thinking": "17*23 = 391."}]}
    message = (await (await client.post("/api/chat", json=body)).json())["message"]
    assert prompt_of(fake) == OPEN
    assert message["content"] == REPLY and "thinking" not in message




async def test_anthropic_continues_after_a_final_thinking_block(stack):
    """Anthropic continues a final assistant message (a prefill), which with thinking on starts with its thinking
    block; one of a thinking block alone goes on after it, counted the same by count_tokens."""
    client, fake = stack
    body = {"model": "fake-model", "max_tokens": 64, "thinking": {"type": "adaptive"}, "messages": [
        USER, {"role": "assistant", "content": [{"type": "thinking", "thinking": "17*23 = 391.", "signature": "s"}]}]}
    whole = await (await client.post("/v1/messages", json=body)).json()
    assert prompt_of(fake) == CUT
    assert whole["content"] == [{"type": "text", "text": REPLY}]
    counted = await (await client.post("/v1/messages/count_tokens", json=body)).json()
    assert counted == {"input_tokens": whole["usage"]["input_tokens"]}
