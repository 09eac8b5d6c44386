"""Every SSE stream says its text is UTF-8 (Content-Type: text/event-stream; charset=utf-8). Python's requests decodes
a text/* body without a charset as ISO-8859-1 (requests.utils.get_encoding_from_headers), so a script streaming
LM Studio's /api/v1/chat with `requests.post(..., stream=True)` and `iter_lines(decode_unicode=True)` read "héllo" as
"hÃ©llo": that stream alone said text/event-stream with no charset, where every other SSE route here names UTF-8 (the
encoding SSE requires)."""
import importlib
import pkgutil

import orjson

import gateway

REPLY = "</think>\n\nhéllo wörld 🌍"


def _stream_classes() -> list:
    """Every class in gateway/ whose content_type is an SSE stream's (the framers streaming loops open with it)."""
    found = set()
    for info in pkgutil.iter_modules(gateway.__path__):
        module = importlib.import_module(f"gateway.{info.name}")
        for value in vars(module).values():
            content_type = getattr(value, "content_type", None) if isinstance(value, type) else None
            if isinstance(content_type, str) and content_type.startswith("text/event-stream"):
                found.add(value)
    return sorted(found, key=lambda cls: cls.__qualname__)


def test_every_sse_framer_names_utf8():
    streams = _stream_classes()
    assert {"ChatFramer", "LlamaCppFramer", "V1ChatFramer"} <= {cls.__name__ for cls in streams}
    assert [cls.__qualname__ for cls in streams if "charset=utf-8" not in cls.content_type] == []


async def test_lm_studios_v1_chat_stream_decodes_as_utf8(stack):
    client, _ = stack
    response = await client.post("/api/v1/chat", data=orjson.dumps(
        {"model": "fake-model", "input": "Hi", "stream": True}))
    assert response.status == 200 and response.content_type == "text/event-stream"
    assert response.charset == "utf-8"
    # What a client that decodes by the header's charset reads.
    text = (await response.read()).decode(response.charset or "iso-8859-1")
    deltas = [orjson.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    assert "".join(d.get("content", "") for d in deltas if d["type"] == "message.delta") == "héllo wörld 🌍"
