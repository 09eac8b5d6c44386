"""Test helpers: Anthropic SSE parsed into events, and the message rebuilt from them as Anthropic's SDKs do."""
import orjson


def parse_events(raw: bytes) -> list:
    """[(event name, payload)] in order; every event has an `event:` line that names its payload's type."""
    events = []
    for frame in raw.decode().split("\n\n"):
        if not frame.strip():
            continue
        lines = dict(line.split(": ", 1) for line in frame.splitlines())
        payload = orjson.loads(lines["data"])
        assert lines["event"] == payload["type"], frame
        events.append((lines["event"], payload))
    return events


def accumulate(events: list) -> dict:
    """The message a client rebuilds: message_start's message, each block's start + deltas, message_delta's stop
    reason and usage. Checks the event order Anthropic documents on the way."""
    names = [name for name, _ in events if name != "ping"]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"], names
    message = events[0][1]["message"]
    open_index = None
    for name, payload in events[1:]:
        if name == "content_block_start":
            assert open_index is None and payload["index"] == len(message["content"])
            message["content"].append(dict(payload["content_block"]))
            open_index = payload["index"]
        elif name == "content_block_delta":
            assert payload["index"] == open_index
            _apply(message["content"][open_index], payload["delta"])
        elif name == "content_block_stop":
            assert payload["index"] == open_index
            block = message["content"][open_index]
            if "_json" in block:
                # A tool_use that max_tokens cut keeps its partial JSON text (Anthropic's SDKs parse it partially).
                raw = block.pop("_json")
                try:
                    block["input"] = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    block["input"] = raw
            open_index = None
        elif name == "message_delta":
            assert open_index is None
            message.update(payload["delta"])
            message["usage"] = payload["usage"]
    return message


def _apply(block: dict, delta: dict) -> None:
    kind = delta["type"]
    if kind == "text_delta":
        block["text"] += delta["text"]
    elif kind == "thinking_delta":
        block["thinking"] += delta["thinking"]
    elif kind == "signature_delta":
        assert block["type"] == "thinking" and delta["signature"], delta
        block["signature"] = delta["signature"]
    elif kind == "input_json_delta":
        block["_json"] = block.get("_json", "") + delta["partial_json"]
    else:
        raise AssertionError(f"unexpected delta {delta}")
