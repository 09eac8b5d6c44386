"""tool_choice "auto" without tools on /v1/chat/completions is a 400, as vLLM (check_tool_usage: "When using
`tool_choice`, `tools` must be set.") and OpenAI answer it; it was taken as no tools, where "required" and a named
function without tools were already refused. "none" without tools passes, as vLLM lets it (Semantic Kernel sends it).
The Responses API (whose default tool_choice is "auto"), Anthropic's Messages and LM Studio's /api/v0 still take
"auto" without tools as no tools (fake scheduler)."""
import pytest

USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("extra", [{}, {"tools": None}], ids=["absent", "null"])
async def test_auto_without_tools_is_a_400(stack, extra, stream):
    client, fake = stack
    body = {"messages": USER, "tool_choice": "auto", "stream": stream, **extra}
    response = await client.post("/v1/chat/completions", json=body)
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "tool_choice" and error["type"] == "invalid_request_error"
    assert error["message"].startswith("tool_choice 'auto' needs a non-empty tools list"), error
    assert fake.script.requests == []


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "tool_choice": "none"}),
    ("/api/v0/chat/completions", {"messages": USER, "tool_choice": "auto"}),
    ("/v1/responses", {"input": "hi", "tool_choice": "auto", "tools": []}),
    ("/v1/responses", {"input": "hi", "tool_choice": "auto"}),
    ("/v1/messages", {"model": "fake-model", "max_tokens": 8, "messages": USER, "tool_choice": {"type": "auto"}}),
], ids=["none", "lmstudio", "responses-empty", "responses-absent", "anthropic"])
async def test_passes_where_it_means_no_tools(stack, path, body):
    client, _ = stack
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    answer = await response.json()
    assert answer.get("error") is None and answer.get("type") != "error"


@pytest.mark.parametrize("call", ["auto", {"name": "f"}])
async def test_function_call_without_functions_names_function_call(stack, call):
    """The deprecated form is refused under its own name (it was named tool_choice, a field the client never sent)."""
    client, fake = stack
    response = await client.post("/v1/chat/completions", json={"messages": USER, "function_call": call})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "function_call", error
    assert error["message"].startswith("function_call needs a non-empty functions list")
    assert fake.script.requests == []


async def test_function_call_none_without_functions_passes(stack):
    client, _ = stack
    response = await client.post("/v1/chat/completions", json={"messages": USER, "function_call": "none"})
    assert response.status == 200 and (await response.json())["object"] == "chat.completion"
