"""Gateway process: /v1 chat prompt shaping as vLLM does it: add_generation_prompt, continue_final_message,
a per-request chat_template and truncate_prompt_tokens."""
from __future__ import annotations

import functools
from typing import Optional

import jinja2

from gateway.chat import TemplateError, compile_template, fold_thinking_parts, protect_strings, render_chat
from gateway.errors import InvalidRequest, Unsupported
from gateway.llama_cpp_clients import speaks_llama_cpp
from gateway.model import ModelCard


# Put after the message continue_final_message leaves open, to find where the template rendered its end (the way
# transformers' apply_chat_template finds it): the message's text itself may be trimmed or appear earlier.
_OPEN_END = "SPARKINFER_CONTINUE_FINAL_MESSAGE_END "


@functools.lru_cache(maxsize=32)
def _compiled(source: str) -> jinja2.Template:
    try:
        return compile_template(source)
    except (jinja2.exceptions.TemplateError, SyntaxError, RecursionError) as exc:
        # Blocks nested ~100 deep compile to Python too indented (SyntaxError), deeper ones overflow the parser.
        raise InvalidRequest(f"chat_template does not compile: {exc}", param="chat_template") from exc


def checkpoint_template(card: ModelCard, tools: Optional[list]) -> Optional[jinja2.Template]:
    """The checkpoint's template for a request: its tool_use template when the request has tools, as transformers'
    get_chat_template picks a named list's tool_use entry for tools that are not None (vLLM renders so)."""
    return card.tool_template if tools is not None and card.tool_template is not None else card.template


def _template(body: dict, card: ModelCard, tools: Optional[list]) -> jinja2.Template:
    source = body.get("chat_template")
    if source:
        return _compiled(source)
    if card.template is None:
        raise Unsupported("this model has no chat template; use /v1/completions or send chat_template",
                          param="messages")
    return checkpoint_template(card, tools)


def _text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content)
    return content or ""


def echo_prefix(body: dict) -> str:
    """vLLM's echo on chat completions: the text of a final assistant message (the one continue_final_message
    continues, or one a new assistant turn follows), which the answer's content starts with; "" for any other last
    message. Text parts are joined as the template joins them, so the echo is the text the answer continues."""
    last = fold_thinking_parts(body["messages"][-1])
    return _text_of(last) if body.get("echo") and last["role"] == "assistant" else ""


def prefill_final_assistant(body):
    """llama-server's and LM Studio's reading of a chat that ends with an assistant message with text: its prefill,
    continued rather than closed and followed by a new turn (llama.cpp's oaicompat_chat_params_parse appends it to the
    generation prompt, --prefill-assistant being on by default since ggml-org/llama.cpp#13174, also on /apply-template;
    LM Studio's API continues a prefix message, lmstudio-bug-tracker#2041), as vLLM's continue_final_message leaves it
    open. A body that sets either generation flag, or whose last assistant turn holds tool calls, is read as sent."""
    if not isinstance(body, dict) or body.get("add_generation_prompt") is not None or \
            body.get("continue_final_message") is not None:
        return body
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    if not isinstance(last, dict) or last.get("role") != "assistant" or last.get("tool_calls") or \
            not (isinstance(last.get("content"), (str, list)) and last["content"]):
        return body
    return {**body, "continue_final_message": True}


def llama_cpp_prefill(body):
    """A llama.cpp client's chat (one naming llama.cpp's own fields, speaks_llama_cpp) on /v1: its final assistant
    message prefilled, as llama-server continues it by default (llama_cpp_template_body); its web UI's Continue sends
    the answer so far as that message. Any other client's gets vLLM's reading, a new turn after it."""
    return llama_cpp_template_body(body) if isinstance(body, dict) and speaks_llama_cpp(body) else body


def llama_cpp_template_body(body):
    """A chat body as llama-server renders it (/apply-template, a llama.cpp client's /v1 chat): its final assistant
    message prefilled (prefill_final_assistant). Raises InvalidRequest (param messages) for an assistant message
    right before that one, as llama-server refuses it (oaicompat_chat_params_parse: 'Cannot have 2 or more assistant
    messages at the end of the list.')."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if isinstance(messages, list) and len(messages) >= 2 and \
            all(isinstance(m, dict) and str(m.get("role")).lower() == "assistant" for m in messages[-2:]):
        raise InvalidRequest("Cannot have 2 or more assistant messages at the end of the list.", param="messages")
    return prefill_final_assistant(body)


def generation_flags(body: dict) -> tuple[bool, bool]:
    """(add_generation_prompt, continue_final_message), checked as vLLM does: both explicitly true is a 400 (with
    its words); so is a last message without content (transformers cannot continue one; continuing would drop its
    tool calls). The last message may have any role: transformers' apply_chat_template continues whatever message
    is last (a user's text to complete, say), and vLLM passes the flag to it unchecked."""
    add = body.get("add_generation_prompt")
    cont = bool(body.get("continue_final_message"))
    if cont and add:
        raise InvalidRequest("Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
                             param="continue_final_message")
    last = body["messages"][-1]
    if cont and last.get("content") is None:
        raise InvalidRequest(f"continue_final_message needs the last message ({last['role']}) to have content to "
                             f"continue", param="continue_final_message")
    return (not cont) if add is None else bool(add), cont


def render_prompt(body: dict, card: ModelCard, tools: Optional[list], kwargs: dict, open_empty: bool = False) -> str:
    """The prompt text of a chat body; with continue_final_message the last message is left open, cut as
    transformers' apply_chat_template cuts it. `open_empty`: a last message without text keeps the whitespace the
    template writes before where its text would be (Ollama's renderers leave a prefill open so: "</think>\n\n")."""
    add, cont = generation_flags(body)
    template = _template(body, card, tools)
    # An assistant turn's thinking parts are its reasoning (SGLang reads them so), never its text.
    messages = [fold_thinking_parts(message) for message in body["messages"]]
    if not cont:
        return render_template(template, messages, tools, add, card, kwargs, body)
    last = messages[-1]
    text = render_template(template, messages[:-1] + [_mark_end(last)], tools, False, card, kwargs, body)
    end = text.rfind(_OPEN_END.strip())
    if end < 0:
        raise InvalidRequest(f"continue_final_message: the chat template does not render the last message "
                             f"({last['role']}), so it cannot be left open", param="continue_final_message")
    # A template that trims the message (Qwen's does) also trimmed the space after the mark, and the message's own
    # trailing whitespace with it: the prompt ends at the message's last visible character, as transformers cuts it
    # (chat_template_utils.render_jinja_template: the text before its tag, right-stripped unless the tag's space
    # survived). An empty message (reasoning alone, or nothing) is continued so too: after the template's thinking
    # block, which it closed ("<think>\n\n</think>" for an empty one: the answer follows, the model does not think).
    return text[:end] if text.startswith(_OPEN_END, end) or (open_empty and not _text_of(last)) \
        else text[:end].rstrip()


def _mark_end(message: dict) -> dict:
    """A copy of the final message with the end mark after its text (after its last text part, for a list)."""
    message = dict(message)
    content = message.get("content")
    if not isinstance(content, list):
        message["content"] = content + _OPEN_END
        return message
    parts = [dict(part) if isinstance(part, dict) else part for part in content]
    for part in reversed(parts):
        if isinstance(part, dict) and isinstance(part.get("text"), str) and part["text"]:
            part["text"] += _OPEN_END
            break
    else:
        # No text (a turn of reasoning alone): the mark alone, where its text would be.
        parts = _OPEN_END
    message["content"] = parts
    return message


def render_template(template, messages: list, tools, add: bool, card: ModelCard, kwargs: dict, body: dict) -> str:
    """The prompt text; the control tokens in the messages, tools, documents and template variables (not the
    tokenizer's special tokens the server adds) marked to stay text, as transformers' sanitize_control_tokens.

    A conversation the template refuses whose system or developer messages could be folded (several, one after the
    first, a developer role) is rendered again with them folded into one leading system message (one_system_message),
    as /api/chat, /v1/responses and /v1/messages send them: the Qwen3.5 templates take one system message, first,
    and no developer role ('System message must be at the beginning.', vllm#41114), and OpenCode, Hermes Agent, pi
    and Codex send more (opencode#15059 and #45055, oh-my-pi#958), which vLLM and SGLang answer with that 400. A
    template that takes them where they stand renders them there, as transformers does."""
    protect = card.protect_text
    variables = dict(card.special_tokens, **protect_strings(kwargs, protect))
    try:
        try:
            return render_chat(template, messages, protect, tools=tools, add_generation_prompt=add, **variables)
        except TemplateError:
            folded = one_system_message(messages)
            if folded is messages:
                raise
            return render_chat(template, folded, protect, tools=tools, add_generation_prompt=add, **variables)
    except InvalidRequest as exc:
        if body.get("chat_template"):
            raise InvalidRequest(f"chat_template: {exc.message}", param="chat_template") from exc
        raise


def check_truncate_size(body: dict, max_context_len: int, max_output: int, output_param: str) -> None:
    """400 for truncate_prompt_tokens beyond the room a prompt has (the context less the requested output), in vLLM's
    words (its TokenizeParams check, before tokenizing): it was accepted, and with a long prompt the request then failed
    later with a context error. An output limit past the context is left to the context-length check."""
    keep = body.get("truncate_prompt_tokens")
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1 or max_output > max_context_len:
        return
    room = max_context_len - max_output
    if keep > room:
        raise InvalidRequest(f"truncate_prompt_tokens={keep} cannot be greater than max_model_len - {output_param} = "
                             f"{room}. Please request a smaller truncation size.", param="truncate_prompt_tokens")


def truncate_prompt_tokens(body: dict, prompt_ids: list, max_input: int) -> list:
    """The last truncate_prompt_tokens ids of the prompt, as vLLM's TokenizeParams truncates (from the left; its
    truncation_side "right" keeps the first ones instead): absent keeps the whole prompt; -1 keeps as many as fit,
    `max_input` (the context less the requested output), so that a long chat keeps its newest turns instead of
    failing; a room of none leaves the prompt to the context check."""
    keep = body.get("truncate_prompt_tokens")
    if keep is None:
        return prompt_ids
    if isinstance(keep, bool) or not isinstance(keep, int) or (keep < 1 and keep != -1):
        raise InvalidRequest(f"truncate_prompt_tokens must be -1 or at least 1, got {keep!r}",
                             param="truncate_prompt_tokens")
    if keep == -1:
        keep = max_input if max_input > 0 else len(prompt_ids)
    return prompt_ids[:keep] if body.get("truncation_side") == "right" else prompt_ids[-keep:]


_INSTRUCTION_ROLES = ("system", "developer")
# The roles a /v1 chat message may have (the deprecated `function` too); lower_roles reads them in any case.
_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def _cased_role(message) -> bool:
    role = message.get("role") if isinstance(message, dict) else None
    return isinstance(role, str) and role != role.lower() and role.lower() in _ROLES


def lower_roles(body):
    """A chat body whose message roles are read in any case ("User", "ASSISTANT"), as SGLang's chat request lowercases
    them (ChatCompletionMessageGenericParam._normalize_role) and Ollama reads them: they were a 400 naming the enum."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not any(_cased_role(message) for message in messages):
        return body
    return {**body, "messages": [{**message, "role": message["role"].lower()} if _cased_role(message) else message
                                 for message in messages]}


def _string_parts(message) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and any(isinstance(part, str) for part in content)


def text_string_parts(body):
    """A chat body whose content parts sent as plain strings are text parts ({"type": "text", "text": part}), as
    vLLM's chat_utils._parse_chat_message_content_part reads a str part for templates that iterate the parts.
    LangChain's ChatOpenAI sends a list of strings as it is (HumanMessage(content=["hi", "there"]), passed on by
    langchain_openai's _format_message_content): it was a 400 'is not of type "object"' for the whole conversation."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not any(_string_parts(message) for message in messages):
        return body
    return {**body, "messages": [
        {**message, "content": [{"type": "text", "text": part} if isinstance(part, str) else part
                                for part in message["content"]]} if _string_parts(message) else message
        for message in messages]}


def one_system_message(messages: list) -> list:
    """Every system (and developer) message folded into one leading system message, as Ollama's Qwen3.5/3.8
    renderer does (normalizeQwen38Messages) and vLLM's Anthropic layer folds them: their trimmed texts (a list's text
    parts side by side) joined by a blank line, the other messages in order; `messages` itself when there is nothing to
    fold. The Qwen3.5 / 3.8 templates refuse a system or developer message that is not first ('System message must be
    at the beginning'), so clients that send several (Codex's per-turn developer instructions, Ollama clients) got a
    400."""
    instructions = [m for m in messages if m["role"] in _INSTRUCTION_ROLES]
    if not instructions or (len(instructions) == 1 and messages[0]["role"] == "system"):
        return messages
    text = "\n\n".join(_text_of(m).strip() for m in instructions if _text_of(m).strip())
    return [{"role": "system", "content": text}] + [m for m in messages if m["role"] not in _INSTRUCTION_ROLES]
