"""Gateway process: JSON in and out of aiohttp with orjson; malformed bodies become typed 400s."""
from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from gateway.errors import ApiError, InvalidRequest


async def read_json(request: web.Request) -> Any:
    """The parsed body; InvalidRequest for an empty, non-UTF-8 or malformed body."""
    raw = await request.read()
    if not raw.strip():
        raise InvalidRequest("the request body is empty; send a JSON object", code="invalid_json")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"the request body is not valid JSON: {exc}", code="invalid_json") from exc


def json_response(body: Any, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, headers=headers,
                        content_type="application/json")


def error_response(error: ApiError) -> web.Response:
    return web.Response(body=error.to_json(), status=error.status, headers=error.headers,
                        content_type="application/json")
