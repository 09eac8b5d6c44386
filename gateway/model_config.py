"""Gateway process: the checkpoint's JSON config fields (tokenizer_config.json, generation_config.json, config.json)
as the model card reads them: optional parts never fail it."""
from __future__ import annotations

from typing import Any, Optional

import orjson


def json_object(text: str) -> dict:
    """A JSON object sent as text; {} when absent or not an object (the card's optional parts never fail it)."""
    try:
        value = orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def special_token_text(value: Any) -> Optional[str]:
    """A special token's text in tokenizer_config.json, stored as a string or a {"content": ...} object; None when
    neither."""
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


def string_list(value: Any) -> Optional[list]:
    """The strings of a JSON list (others left out); None when the value is no list."""
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else None


def positive_int(value: Any) -> Optional[int]:
    """The value when it is an integer above 0 (not a bool); None otherwise."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def template_from_config(tok_cfg: dict, name: str = "default") -> str:
    """tokenizer_config.json's chat template of that name: a named list's entry ("default" is the chat one, else its
    first), a plain string as the default; "" without one."""
    template = tok_cfg.get("chat_template") or ""
    if isinstance(template, list):
        named = {item.get("name"): item.get("template") for item in template if isinstance(item, dict)}
        template = named.get(name) or (next(iter(named.values()), "") if name == "default" else "")
    elif name != "default":
        return ""
    return template if isinstance(template, str) else ""
