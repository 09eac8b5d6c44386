"""Gateway with the fake scheduler: llama.cpp's /apply-template and LM Studio's /api/v0/chat/completions continue a
chat that ends with an assistant message (its prefill), as llama-server (--prefill-assistant, on by default since
ggml-org/llama.cpp#13174) and LM Studio (lmstudio-bug-tracker#2041) do; /v1 keeps vLLM's reading (a new turn unless
continue_final_message is sent)."""
import pytest

USER = {"role": "user", "content": "Tell me a story."}
PREFILL = {"role": "assistant", "content": "Once upon a time"}
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}


def _sent_prompt(fake) -> str:
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


async def _rendered(client, body: dict) -> str:
    response = await client.post("/apply-template", json=body)
    assert response.status == 200, await response.text()
    return (await response.json())["prompt"]


async def test_apply_template_leaves_a_final_assistant_message_open(stack):
    client, _ = stack
    prompt = await _rendered(client, {"messages": [USER, PREFILL], **NO_THINKING})
    # llama.cpp renders the turns before it with the generation prompt, then appends the prefill's text.
    opened = await _rendered(client, {"messages": [USER], **NO_THINKING})
    assert prompt == opened + "Once upon a time"


@pytest.mark.parametrize("flags", [{"add_generation_prompt": True}, {"continue_final_message": False}],
                         ids=["add_generation_prompt", "continue_final_message false"])
async def test_apply_template_reads_an_explicit_flag_as_sent(stack, flags):
    client, _ = stack
    prompt = await _rendered(client, {"messages": [USER, PREFILL], **NO_THINKING, **flags})
    assert "Once upon a time<|im_end|>\n<|im_start|>assistant\n" in prompt


async def test_lm_studio_chat_continues_a_final_assistant_message(stack):
    client, fake = stack
    body = {"model": "fake-model", "messages": [USER, PREFILL], "max_tokens": 2, **NO_THINKING}
    response = await client.post("/api/v0/chat/completions", json=body)
    assert response.status == 200, await response.text()
    assert _sent_prompt(fake).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\nOnce upon a time")
    # /v1 is vLLM's: the same body closes the assistant turn and opens a new one.
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status == 200 and _sent_prompt(fake).endswith("Once upon a time<|im_end|>\n<|im_start|>"
                                                                  "assistant\n<think>\n\n</think>\n\n")


async def test_a_final_assistant_tool_call_is_not_a_prefill(stack):
    client, _ = stack
    call = {"role": "assistant", "content": "Let me look.", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "lookup", "arguments": "{}"}}]}
    prompt = await _rendered(client, {"messages": [USER, call], **NO_THINKING})
    assert "</tool_call><|im_end|>\n<|im_start|>assistant\n" in prompt
