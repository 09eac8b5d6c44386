"""Gateway process: the strict JSON reading of what a model wrote (tool-call arguments, JSON values of parameters)."""
from __future__ import annotations

import json
from typing import Any

import orjson


def load_json(text: str) -> Any:
    """Strict JSON as orjson reads it (no NaN, Infinity, 1e999 or lone surrogates: ValueError), but with every
    integer exact: orjson checks the text, the json module builds the value. Nesting too deep for the json module
    (it recurses per level; orjson allows 1024) is a ValueError too, so a model that nests a value that deep leaves
    it text instead of failing the request."""
    orjson.loads(text)
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc
