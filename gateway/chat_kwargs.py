"""Gateway process: the chat template's variables of an OpenAI chat body (chat_template_kwargs and the thinking
switches), as /v1/chat/completions and /v1/tokenize render them."""
from __future__ import annotations

from gateway.config import SERVER_TEMPLATE_VARIABLES
from gateway.errors import InvalidRequest
from gateway.model import ModelCard

# Efforts the template has no tier for, read as the nearest one (as Ollama's /v1 clamps them).
_EFFORT_ALIASES = {"minimal": "low", "max": "xhigh", "ultra": "xhigh"}


def template_kwargs(body: dict, card: ModelCard) -> dict:
    """chat_template_kwargs plus the thinking switches; 400 for a variable the server passes to the template itself
    (messages, tools, add_generation_prompt, the tokenizer's special tokens): a second value was a 500. TabbyAPI's
    template_vars are chat_template_kwargs too (its ChatCompletionRequest takes either name; its maintainers answer
    'template_vars: {enable_thinking: false}' to turn Qwen3's thinking off, theroyallab/tabbyAPI#340)."""
    kwargs = {**(body.get("template_vars") or {}), **(body.get("chat_template_kwargs") or {})}
    taken = next((key for key in kwargs if key in SERVER_TEMPLATE_VARIABLES or key in card.special_tokens), None)
    if taken is not None:
        raise InvalidRequest(f"chat_template_kwargs.{taken} cannot be set: the server passes '{taken}' to the chat "
                             f"template itself (from the request's messages, tools and add_generation_prompt and the "
                             f"tokenizer's special tokens)", param=f"chat_template_kwargs.{taken}")
    if kwargs.get("enable_thinking") is None:
        kwargs.pop("enable_thinking", None)
    if body.get("enable_thinking") is not None:
        kwargs["enable_thinking"] = body["enable_thinking"]
    reasoning = body.get("reasoning") or {}
    if reasoning.get("enabled") is not None:
        # OpenRouter's reasoning.enabled, an explicit switch too (below the template's own and enable_thinking).
        kwargs.setdefault("enable_thinking", reasoning["enabled"])
    effort = body.get("reasoning_effort") or reasoning.get("effort")
    if effort is not None and effort != "none":
        kwargs["reasoning_effort"] = _EFFORT_ALIASES.get(effort, effort)
    # An explicit switch wins over the effort, as in vLLM's build_chat_params (reasoning_effort sets enable_thinking
    # only when chat_template_kwargs lacks it); "none" turns thinking off, any other effort on. Without either the
    # variable stays undefined, the template's own default, as vLLM and transformers render it: a template that
    # thinks only when asked (Gemma 4's, a request's chat_template) was made to think.
    if effort is not None:
        kwargs.setdefault("enable_thinking", effort != "none")
    for key, value in card.default_template_kwargs.items():
        # The server's defaults (vLLM's --default-chat-template-kwargs) sit under everything the request set or
        # implied, as vLLM's ChatParams.with_defaults: a request's reasoning_effort still turns thinking on.
        kwargs.setdefault(key, value)
    if body.get("documents") is not None:
        # vLLM's build_chat_params hands documents to the template (RAG templates render them; Qwen's ignores them).
        kwargs["documents"] = body["documents"]
    return kwargs
