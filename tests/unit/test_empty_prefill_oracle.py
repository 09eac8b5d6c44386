"""Unit tests: a final assistant message with no text (content "" or [], with or without reasoning) left open, against
transformers' apply_chat_template(continue_final_message=True) on the tiny model's template: vLLM's /v1 (which hands
the flag to it), /v1/tokenize and an in-progress /v1/responses message (vLLM's should_continue_final_message) get its
prompt, the turn's thinking block closed ("<think>\\n\\n</think>" for an empty one: the model answers, it does not think
again); Ollama's /api/chat prefill gets it with the blank line the template writes before the turn's text, as Ollama's
Qwen3.5 renderer leaves any final assistant message open (model/renderers/qwen35.go) — the text transformers
renders for the same turn with one character of content, less that character. An empty turn was a fresh generation
prompt ("<think>\\n", the model thought again) on /v1 and /v1/responses, and closed with a new turn after it on
/api/chat."""
import copy

import pytest

from tests.unit.test_chat_template_oracle import hf_tokenizer, served
from tests.unit.test_template_hf_sandbox import tiny_stack  # noqa: F401 - tiny_stack is a fixture

USER = {"role": "user", "content": "17*23?"}
FINALS = {
    "empty": {"role": "assistant", "content": ""},
    "no-parts": {"role": "assistant", "content": []},
    "reasoning-only": {"role": "assistant", "content": "", "reasoning_content": "17*23 = 391."},
}
THINKING = {"default": {}, "off": {"enable_thinking": False}}


def continued(messages: list, tokenize: bool = True, **kwargs):
    """transformers' prompt with the last message left open: its ids, or its text (tokenize False)."""
    messages = copy.deepcopy(messages)
    if messages[-1]["content"] == []:
        messages[-1]["content"] = ""   # transformers finds no text part to continue in []; "" renders the same
    out = hf_tokenizer().apply_chat_template(messages, tokenize=tokenize, continue_final_message=True,
                                            add_generation_prompt=False, **kwargs)
    return out if not tokenize else list(out["input_ids"] if hasattr(out, "keys") else out)


@pytest.mark.parametrize("thinking", THINKING)
@pytest.mark.parametrize("final", FINALS)
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/tokenize"])
async def test_v1_continue_final_message(tiny_stack, path, final, thinking):
    client, fake = tiny_stack
    messages = [USER, FINALS[final]]
    body = {"model": "default", "messages": messages, "continue_final_message": True, "add_generation_prompt": False,
            "chat_template_kwargs": THINKING[thinking], **({"max_tokens": 1} if "chat" in path else {})}
    assert await served(client, fake, path, body) == continued(messages, **THINKING[thinking])


@pytest.mark.parametrize("reasoning", [[], [{"type": "reasoning", "id": "rs", "summary": [], "content": [
    {"type": "reasoning_text", "text": "17*23 = 391."}]}]], ids=["empty", "reasoning-only"])
async def test_responses_in_progress_message(tiny_stack, reasoning):
    client, fake = tiny_stack
    body = {"model": "default", "max_output_tokens": 16, "input": [USER, *reasoning, {
        "type": "message", "role": "assistant", "status": "in_progress", "content": []}]}
    final = FINALS["reasoning-only" if reasoning else "empty"]
    assert await served(client, fake, "/v1/responses", body) == continued([USER, final])


@pytest.mark.parametrize("think", [None, False], ids=["default", "off"])
@pytest.mark.parametrize("final", ["empty", "reasoning-only"])
async def test_ollama_prefill(tiny_stack, final, think):
    client, fake = tiny_stack
    message = {"role": "assistant", "content": ""}
    if final == "reasoning-only":
        message["thinking"] = FINALS[final]["reasoning_content"]
    body = {"model": "default", "stream": False, "messages": [USER, message],
            **({} if think is None else {"think": think})}
    kwargs = {} if think is None else {"enable_thinking": think}
    one_char = continued([USER, {**FINALS[final], "content": "X"}], tokenize=False, **kwargs)
    assert hf_tokenizer().decode(await served(client, fake, "/api/chat", body)) == one_char[:-1]
