"""Test support: streamed OpenAI tool-call deltas joined into whole calls, as openai-python's stream helpers and
other clients accumulate them (by index: the id, type and name of the first, the arguments of all)."""


def join_calls(deltas: list) -> list:
    """Whole calls ({id, type, function: {name, arguments}}, in index order) of streamed delta.tool_calls entries."""
    calls: dict = {}
    for delta in deltas:
        call = calls.setdefault(delta.get("index", 0), {"function": {"arguments": ""}})
        for key in ("id", "type"):
            if key in delta:
                call[key] = delta[key]
        function = delta.get("function") or {}
        if "name" in function:
            call["function"]["name"] = function["name"]
        call["function"]["arguments"] += function.get("arguments") or ""
    return [{"id": c.get("id"), "type": c.get("type"), "function": {"name": c["function"].get("name"),
                                                                    "arguments": c["function"]["arguments"]}}
            for _, c in sorted(calls.items())]


def chunk_calls(chunks: list) -> list:
    """join_calls over every choice-0 delta.tool_calls of parsed chat chunks."""
    return join_calls([call for chunk in chunks for choice in chunk.get("choices") or []
                       for call in choice["delta"].get("tool_calls") or []])
