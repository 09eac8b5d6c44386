"""Gateway process: llama.cpp server's output limit, n_predict, and its aliases max_completion_tokens and max_tokens
(tools/server/server-task.cpp params_from_json_cmpl: n_predict, else max_completion_tokens, else max_tokens), read
as llama.cpp reads them on /completion and on the /v1 routes."""
from __future__ import annotations

from typing import Optional

from gateway.errors import InvalidRequest
from gateway.llama_cpp_clients import speaks_llama_cpp
from gateway.pydantic_scalars import lax_scalars
from gateway.schema_errors import json_repr
from gateway.schema_validate import integral


def n_predict(body: dict, allow_zero: bool = False) -> tuple[bool, Optional[int]]:
    """(sent, limit) for llama.cpp's n_predict, which wins over max_completion_tokens and max_tokens as llama.cpp's
    server reads them; limit None is -1 or -2 (no limit: up to the context). 0 only where max_tokens may be 0
    (completions with echo)."""
    value = body.get("n_predict")
    if value is None:
        return False, None
    if value in (-1, -2):
        return True, None
    if value < 1 and not (allow_zero and value == 0):
        raise InvalidRequest(f"n_predict must be -1 (no limit), -2 (until the context is full) or at least 1, got "
                             f"{value}", param="n_predict")
    return True, value


_LIMIT_SCHEMA = {"type": ["integer", "null"]}
_LIMIT_FIELDS = ("n_predict", "max_completion_tokens", "max_tokens")    # the first one sent wins


def _is_integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def as_n_predict(body):
    """llama.cpp's /completion limit: n_predict, else max_completion_tokens, else max_tokens (server-schema.cpp's
    aliases), with n_predict's -1, 0 and cap at a full context; each read as the /v1 schema reads it ("3" is 3, false
    0), so the limit applied, the prompt-only 0 and generation_settings' echo are one number."""
    if not isinstance(body, dict):
        return body
    # A whole float (3.0) is the int it is, as pydantic's lax mode and nlohmann's get<int> (json_value) read it.
    body = {**body, **{key: integral(lax_scalars(body[key], _LIMIT_SCHEMA), _LIMIT_SCHEMA)
                       for key in _LIMIT_FIELDS if key in body}}
    name = next((key for key in _LIMIT_FIELDS if body.get(key) is not None), None)
    if name in (None, "n_predict"):
        return body
    limit = body[name]
    if not _is_integer(limit) or limit < -2:
        if name == "max_tokens":   # the /v1 schema's 400 names it
            return body
        raise InvalidRequest(f"{name} must be -1 (no limit), -2 (until the context is full) or at least 0, got "
                             f"{json_repr(limit)}", param=name)
    out = {key: value for key, value in body.items() if key not in _LIMIT_FIELDS}
    out["n_predict"] = limit
    return out


_NO_LIMIT = (-1, -2)


def alias_no_limit(body):
    """A llama.cpp client's "no limit" sent under n_predict's aliases, as n_predict: llama-server reads max_tokens
    and max_completion_tokens as n_predict, so their -1 (and -2) are its no limit, up to the context; its web UI
    sends max_tokens -1 with every chat by default (webui settings-config.ts: "Use -1 for infinite (no limit)").
    Only on a request that speaks llama.cpp (speaks_llama_cpp): elsewhere -1 stays vLLM's 400 (max_tokens must be at
    least 1), as OpenAI and vLLM refuse it."""
    if not isinstance(body, dict) or body.get("n_predict") is not None or not speaks_llama_cpp(body):
        return body
    name = next((key for key in _LIMIT_FIELDS if body.get(key) is not None), None)
    if name is None or not _is_integer(body[name]) or body[name] not in _NO_LIMIT:
        return body
    return {**{key: value for key, value in body.items() if key not in _LIMIT_FIELDS}, "n_predict": body[name]}
