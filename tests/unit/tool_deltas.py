"""Test support: streamed OpenAI tool-call deltas joined into whole calls, as openai-python's stream helpers and
other clients accumulate them (by index: the id, type and name of the first, the arguments of all)."""
import orjson


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


def first_call_arguments(raw: bytes, stream: bool) -> str:
    """The first tool call's arguments in a /v1/chat/completions answer body: the streamed one's SSE chunks joined
    (chunk_calls), else the message's tool_calls."""
    if stream:
        chunks = [orjson.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]
        return chunk_calls(chunks)[0]["function"]["arguments"]
    return orjson.loads(raw)["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]


def ollama_call_arguments(raw: bytes) -> list:
    """The arguments (objects, as Ollama sends them) of every tool call in an /api/chat answer body, in order: the
    message.tool_calls of each NDJSON line (one line when not streamed)."""
    return [call["function"]["arguments"] for line in raw.decode().splitlines() if line.strip()
            for call in orjson.loads(line)["message"].get("tool_calls") or []]


async def route_call_arguments(client, tools: list, stream: bool) -> tuple:
    """(the first call's arguments on /v1/chat/completions, every call's arguments on /api/chat) for one user turn
    with `tools`, thinking off, streamed or not: the fake scheduler's scripted reply read back by both routes."""
    body = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "tools": tools,
            "enable_thinking": False, "stream": stream}
    raw = await (await client.post("/v1/chat/completions", json=body)).read()
    ollama = await (await client.post("/api/chat", json={**body, "think": False})).read()
    return first_call_arguments(raw, stream), ollama_call_arguments(ollama)
