"""Gateway process: renders the checkpoint's Jinja chat template exactly as transformers' apply_chat_template does."""
from __future__ import annotations

import functools
import json
import logging
from datetime import datetime
from typing import Any, Callable, Optional

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from gateway.control_tokens import Marker
from gateway.errors import InvalidRequest
from gateway.once_log import OnceLog, short_name
from gateway.tools import load_json

log = logging.getLogger("sparkinfer.gateway")

class TemplateError(InvalidRequest):
    """400: the chat template refused the conversation (raise_exception or a render error)."""
    code = "invalid_messages"


def _raise_exception(message: str):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent=None, separators=None, sort_keys: bool = False) -> str:
    # transformers overrides jinja's tojson: no HTML escaping, same keyword options as json.dumps.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class GenerationTag(Extension):
    """transformers' `{% generation %}...{% endgeneration %}` block (its AssistantTracker, which marks the assistant's
    text for return_assistant_tokens_mask): the body rendered as it is, in a scope of its own, as apply_chat_template
    renders it without the mask (chat_template_utils._compile_jinja_template). Templates made for training (TRL's
    SFT) carry it; without the tag they did not compile (a 400), where vLLM, through transformers, renders them."""
    tags = {"generation"}

    def parse(self, parser):
        """Jinja's parse hook: the block's body up to endgeneration, called through _body (rendered unchanged)."""
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    @staticmethod
    def _body(caller) -> str:
        return caller()


def compile_template(source: str) -> jinja2.Template:
    """Compiles a chat template in the sandbox transformers uses (trim_blocks, lstrip_blocks, its generation tag)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols, GenerationTag])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(source)


def _parse_arguments(arguments: Any, name: Any) -> dict:
    """An earlier call's arguments as the mapping templates iterate (Qwen's `tool_call.arguments|items`). OpenAI sends
    them as a JSON string; one that is no JSON object (text a model wrote, cut or malformed, "", null, a list) is {},
    with a warning, as vLLM's chat_utils._postprocess_messages coerces it (vllm#48922): the turn stays in the history
    every later request replays, and a string failed the template (a 400 for the whole conversation)."""
    parsed = arguments
    if isinstance(arguments, str):
        try:
            parsed = load_json(arguments) if arguments else {}   # not orjson: floats of integers beyond 64 bits
        except ValueError:
            parsed = None
    if isinstance(parsed, dict):
        return parsed
    if arguments not in (None, ""):
        log.warning("tool call %s: arguments are not a JSON object (%d characters); rendered as {}", short_name(name),
                    len(arguments) if isinstance(arguments, str) else 0)
    return {}


# The names clients give an earlier turn's reasoning (vLLM, OpenRouter and Ollama), in transformers' order of
# precedence: the first one set fills the others a template may read.
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def reasoning_of(message: dict):
    """The reasoning text a message carries under any of its names (None without one): the first one set, but an empty
    one does not hide another's text (pi sends `reasoning` with an empty `reasoning_content`; vLLM reads `reasoning`
    first, Ollama's /v1 only `reasoning`, so both replay that text)."""
    values = [message[key] for key in REASONING_FIELDS if message.get(key) is not None]
    return next((value for value in values if value != ""), values[0] if values else None)


# Content parts that carry an assistant turn's reasoning: SGLang's ChatCompletionMessageContentThinkingPart (type
# "thinking" or "reasoning", its text under `thinking` or `text`), the shape LiteLLM gives Anthropic's thinking blocks
# and vLLM's chat_utils reads as Mistral's thinking chunk.
THINKING_PARTS = ("thinking", "reasoning")


def thinking_text(part: Any) -> Optional[str]:
    """The reasoning a thinking content part carries (None for any other part)."""
    if not isinstance(part, dict) or part.get("type") not in THINKING_PARTS:
        return None
    text = part.get("thinking") if part.get("thinking") is not None else part.get("text")
    return text if isinstance(text, str) else None


def fold_thinking_parts(message: dict) -> dict:
    """An assistant message whose content parts carry its reasoning, as the template reads the turn: their text is
    its reasoning_content (unless a reasoning field already holds text), the other parts its content."""
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list):
        return message
    thoughts = [thinking_text(part) for part in content]
    if all(thought is None for thought in thoughts):
        return message
    folded = {**message, "content": [part for part, thought in zip(content, thoughts) if thought is None]}
    if not reasoning_of(message):
        folded["reasoning_content"] = "\n".join(thought for thought in thoughts if thought is not None)
    return folded


def prepare_messages(messages: list[dict]) -> list[dict]:
    """Copies OpenAI messages into the shape chat templates expect (arguments as dicts, no nulls but a null content
    as "", the reasoning under `reasoning_content` and `thinking` whichever name the client used, as transformers
    aliases them)."""
    out = []
    for message in messages:
        msg = {key: value for key, value in message.items() if value is not None}
        msg.setdefault("content", "")  # as vLLM's chat_utils: a null (or absent) content reaches the template as ""
        reasoning = reasoning_of(msg)
        if reasoning is not None:
            msg.setdefault("thinking", reasoning)
            msg["reasoning_content"] = reasoning
        calls = msg.get("tool_calls")
        if calls:
            msg["tool_calls"] = [_prepare_call(call) for call in calls]
        elif calls is not None:
            # An empty list is no calls: templates that test `'tool_calls' in message` (Llama 3's) took the turn for a
            # call and refused it; vLLM's _postprocess_messages drops it too.
            del msg["tool_calls"]
        if isinstance(msg.get("content"), list):
            msg["content"] = [_as_text_part(part) for part in msg["content"]]
            if msg.get("role") == "tool":
                msg["content"] = _media_as_lines(msg["content"])
        out.append(msg)
    return out


def _as_text_part(part: Any) -> Any:
    """A refusal part (OpenAI's, in an assistant turn) as the text part templates read, as vLLM reads its refusal."""
    if isinstance(part, dict) and part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
        return {"type": "text", "text": part["refusal"]}
    return part


# Media parts (vLLM's chat_utils part types) a tool message may carry: Codex CLI's chat wire sends view_image's output
# as an image_url part of the tool message (codex-rs core/src/chat_completions.rs).
TOOL_MEDIA_PARTS = ("image_url", "input_audio", "audio_url", "video_url", "file", "input_image", "input_file")
_LEFT_OUT = OnceLog("/v1/chat/completions: %s parts of tool messages are left out (a line in their place says so): "
                    "the model reads text only")


def _media_as_lines(parts: list) -> list:
    """A tool message's media parts as text parts, each a line saying it was left out, as /v1/responses and
    /v1/messages read them in a tool result: the tool message is replayed in every later request, and its 400 failed
    each one (ggml-org/llama.cpp#23890); the model learns what it did not get."""
    out = []
    for j, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in TOOL_MEDIA_PARTS:
            out.append(part)
            continue
        _LEFT_OUT.note([kind])
        # The line stands alone: the text parts around it are joined as they are.
        before = "\n" if out and not str(out[-1].get("text", "")).endswith("\n") else ""
        after = "\n" if j < len(parts) - 1 else ""
        out.append({"type": "text", "text": f"{before}[{kind} left out: this model reads text only]{after}"})
    return out


def _prepare_call(call: dict) -> dict:
    call = dict(call)
    function = dict(call.get("function") or {})
    function["arguments"] = _parse_arguments(function.get("arguments"), function.get("name"))
    call["function"] = function
    return call


def protect_strings(value: Any, protect: Callable[[str], str]) -> Any:
    """A copy of messages or tools with `protect` applied to every string in them, keys too, as transformers'
    mark_control_tokens marks every value. Roles among them: a role is one of the names the routes accept, which
    no marking changes, and a value under a "role" key elsewhere (a tool call's argument, a tool's parameter) is
    text like any other."""
    if isinstance(value, str):
        return protect(value)
    if isinstance(value, list):
        return [protect_strings(item, protect) for item in value]
    if isinstance(value, dict):
        return {protect_strings(key, protect): protect_strings(item, protect) for key, item in value.items()}
    return value


def render_releasing(template: jinja2.Template, variables: dict) -> str:
    """template.render(**variables), with the variables the render kept let go of as soon as it ends.

    A template that defines a macro (Qwen3.5's render_content, most chat templates' tool renderers) leaves a reference
    cycle: jinja2 stores the Macro in its Context's vars and the macro's closure holds the Context, so the Context and
    every variable in it (the messages, the strings the template `set`) live until Python's full collection, which runs
    rarely: a gateway that rendered six 28 MiB prompts held them, 340 MB, long after their answers.
    """
    context = template.new_context(variables)
    try:
        return template.environment.concat(template.root_render_func(context))
    except Exception:
        # As Template.render: the traceback points into the template source.
        template.environment.handle_exception()
    finally:
        # new_context copied the variables into a dict of the context's own (parent); the cycle keeps empty dicts.
        context.vars.clear()
        context.parent.clear()


_PARTS_PROBE = "text part probe 7f3a"  # text no template writes itself


@functools.lru_cache(maxsize=64)
def reads_text_parts(template: jinja2.Template) -> bool:
    """Whether the template renders a content list of text parts as their text (vLLM's "openai" content format: the
    template iterates the parts). One that reads content only as a string (ChatML's classic `'<|im_start|>' +
    message['content'] + ...`, a bare `{{ message.content }}`) fails on a list or prints Python's repr of it."""
    probe = [{"role": "user", "content": [{"type": "text", "text": _PARTS_PROBE}]}]
    try:
        text = render_releasing(template, {"messages": probe, "tools": None, "documents": None,
                                           "add_generation_prompt": True})
    except Exception:   # noqa: BLE001 - a template that cannot take the parts reads strings
        return False
    return _PARTS_PROBE in text and not any(key in text for key in ("'text'", '"text"', "'type'", '"type"'))


def _joined_parts(message: dict) -> dict:
    """A message whose content is a list of text parts, its content one string: the texts joined by newlines, as vLLM's
    chat_utils._parse_chat_message_content_parts joins them for a template of the "string" content format (llama.cpp
    joins them so for a template that does not require typed content)."""
    content = message.get("content")
    if not isinstance(content, list) or not all(isinstance(part, dict) and isinstance(part.get("text"), str)
                                                 for part in content):
        return message
    return {**message, "content": "\n".join(part["text"] for part in content)}


def render_chat(template: jinja2.Template, messages: list[dict], protect: Optional[Marker] = None, /,
                tools: Optional[list[dict]] = None, add_generation_prompt: bool = True,
                documents: Optional[list[dict]] = None, **kwargs: Any) -> str:
    """Renders a conversation to the prompt text; `kwargs` are template variables (chat_template_kwargs may name
    one `template` or `protect`: the parameters before them are positional). `documents` (vLLM's, for RAG
    templates) is always defined, None when unset, as transformers' render_jinja_template passes it. Raises
    TemplateError on a template refusal. `protect`
    (ModelCard.protect_text) marks the special tokens the messages, tools and documents carry, so that they are
    tokenized as the text they are: a user's "<|im_end|><|im_start|>system" must not forge a turn, nor its
    ["x<|im_", "end|>"] that the template writes side by side (the rendered text is sealed)."""
    messages = prepare_messages(messages)
    if not reads_text_parts(template):
        messages = [_joined_parts(message) for message in messages]
    if protect is not None:
        messages, tools, documents = (protect_strings(value, protect) for value in (messages, tools, documents))
    try:
        text = render_releasing(template, dict(kwargs, messages=messages, tools=tools, documents=documents,
                                               add_generation_prompt=add_generation_prompt))
        return text if protect is None else protect.seal(text)
    except jinja2.exceptions.TemplateError as exc:
        raise TemplateError(f"chat template error: {exc}", param="messages") from exc
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
        raise TemplateError(f"chat template could not render these messages: {exc}",
                            param="messages") from exc
