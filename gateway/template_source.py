"""Gateway process: the server's chat template (SPARKINFER_CHAT_TEMPLATE, --chat-template), read at start."""
from __future__ import annotations

import codecs

import jinja2

from gateway.chat import compile_template

# A value with none of these is a path (vLLM's load_chat_template: JINJA_CHARS).
_TEMPLATE_CHARS = "{}\n"


def load_chat_template(value: str) -> str:
    """The template text `value` names, as vLLM's --chat-template reads it (vllm/entrypoints/chat_utils.py
    load_chat_template): a file's contents, else the value itself with its escapes (\\n) decoded when it reads as a
    template; ValueError for a path that does not open or a template that does not compile."""
    try:
        with open(value, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        if not any(char in value for char in _TEMPLATE_CHARS):
            raise ValueError(f"{value!r} looks like a file path, but it cannot be opened ({exc.strerror})") from None
        text = codecs.decode(value, "unicode_escape")
    try:
        compile_template(text)
    except (jinja2.exceptions.TemplateError, SyntaxError, RecursionError) as exc:
        raise ValueError(f"the template does not compile: {exc}") from None
    return text
