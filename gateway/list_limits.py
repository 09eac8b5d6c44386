"""Gateway process: list sizes of a /v1 body checked before JSON-schema validation.

The schema validator walks every item of every list, so a prompt of 3 million token ids took 98 s to refuse and
200 000 messages 10 s. A list that cannot fit the context, or is longer than the API allows, is refused here at
once (400, naming the field) before any item is looked at.
"""
from __future__ import annotations

from typing import Any

from gateway.errors import ContextLengthExceeded, InvalidRequest, prompt_overflow_message

MAX_FUNCTIONS = 128        # OpenAI's limit on the deprecated functions (vLLM, LM Studio and Ollama cap no tools list)
# prompts in one /v1/completions batch (COMPLETION_SCHEMA says the same) and conversations in one batch chat: vLLM sets
# no bound; lm-eval's local-completions sends batch_size prompts a request (64 was a 400 past batch_size 64)
MAX_PROMPTS = 2048
# stop strings (the schemas say the same): vLLM, Ollama and llama.cpp set none (SillyTavern sends a user's whole list,
# a group chat's names too); the stop matcher's cost per token does not grow with their number (gateway.stream)
MAX_STOPS = 1024
MAX_STOP_TOKEN_IDS = 64
MAX_N = 128                # choices per prompt (OpenAI's limit on n)
MAX_CHOICES = 2048         # choices per /v1/completions request: n times its prompts, each one scheduler request


def _at_most(body: dict, name: str, limit: int) -> None:
    value = body.get(name)
    if isinstance(value, list) and len(value) > limit:
        raise InvalidRequest(f"'{name}' holds {len(value)} items; at most {limit} are accepted", param=name)


def _overflow(num_items: int, ctx: int, param: str) -> ContextLengthExceeded:
    """More items than the context, each rendering to at least one token: a lower bound, so not vLLM's exact words."""
    return ContextLengthExceeded(
        f"This model's maximum context length is {ctx} tokens. However, your prompt contains at least {num_items} "
        f"tokens, which leaves no room for a completion. Please reduce the length of the prompt.",
        param=param).counts(ctx, num_items, at_least=True)


def _ids_overflow(num_ids: int, ctx: int) -> ContextLengthExceeded:
    """A token-id prompt's count is exact: vLLM's words for a prompt that fills the context, as a text prompt of as
    many tokens gets them."""
    return ContextLengthExceeded(prompt_overflow_message(ctx, num_ids), param="prompt").counts(ctx, num_ids)


def _check_prompt(prompt: Any, ctx: int) -> None:
    if not isinstance(prompt, list) or not prompt:
        return
    if isinstance(prompt[0], int) and not isinstance(prompt[0], bool):
        if len(prompt) >= ctx:
            raise _ids_overflow(len(prompt), ctx)
        return
    if len(prompt) > MAX_PROMPTS:
        raise InvalidRequest(f"'prompt' holds {len(prompt)} prompts; at most {MAX_PROMPTS} are accepted",
                             param="prompt")
    for item in prompt:
        if isinstance(item, list) and len(item) >= ctx:
            raise _ids_overflow(len(item), ctx)


def check_list_sizes(body: Any, ctx: int, chat: bool, vocab_size: int) -> None:
    """400 for a list too long to fit `ctx` tokens or the API's limits; cheap (lengths only)."""
    if not isinstance(body, dict):
        return
    bias = body.get("logit_bias")
    # The object form (token id -> bias) and llama.cpp's list form ([token id or text, bias] pairs) both set one bias
    # per vocabulary token at most: more entries than that only repeat tokens, and each one costs validation time.
    if isinstance(bias, (dict, list)) and len(bias) > vocab_size:
        raise InvalidRequest(f"'logit_bias' holds {len(bias)} entries but the vocabulary has only {vocab_size} "
                             f"tokens", param="logit_bias")
    for name, limit in (("functions", MAX_FUNCTIONS), ("stop", MAX_STOPS), ("stop_token_ids", MAX_STOP_TOKEN_IDS)):
        _at_most(body, name, limit)
    tools = body.get("tools")
    # Each tool renders to at least one token; OpenAI's own cap of 128 is not vLLM's or LM Studio's (none).
    if isinstance(tools, list) and len(tools) >= ctx:
        raise _overflow(len(tools), ctx, "tools")
    if body.get("truncate_prompt_tokens") is not None:
        # vLLM's truncate_prompt_tokens keeps the last N tokens (-1: as many as fit): a longer prompt is allowed then.
        return
    if not chat:
        _check_prompt(body.get("prompt"), ctx)
        return
    messages = body.get("messages")
    # Every message renders to at least one token, so more messages than the context cannot fit.
    if isinstance(messages, list) and len(messages) >= ctx:
        raise _overflow(len(messages), ctx, "messages")


def check_num_choices(body: dict) -> None:
    """400 when a validated /v1/completions body asks for more than MAX_CHOICES choices in all (n per prompt)."""
    prompt, n = body["prompt"], body.get("n") or 1
    num_prompts = len(prompt) if isinstance(prompt, list) and isinstance(prompt[0], (str, list)) else 1
    if n * num_prompts > MAX_CHOICES:
        raise InvalidRequest(f"n ({n}) times the number of prompts ({num_prompts}) asks for {n * num_prompts} "
                             f"choices; at most {MAX_CHOICES} are accepted in one request", param="n")
