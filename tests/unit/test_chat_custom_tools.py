"""OpenAI's custom (freeform) tools on the chat completions routes are a 400 that names them, not "'tools[0].function'
is a required property", which clients read as a function tool they left out (microsoft/foundry-local#1080 asks for
exactly this: a clear unsupported-tool-type error; JiuliNuoyi/CodexRosetta#1 hit the same 400 forwarding Codex CLI's
apply_patch). vLLM's Chat Completions takes function tools only; /v1/responses serves custom ones."""
import pytest

CUSTOM = {"type": "custom", "custom": {"name": "apply_patch", "description": "Patch files",
                                       "format": {"type": "grammar", "grammar": {"syntax": "lark",
                                                                                   "definition": "start: /(?s).+/"}}}}
FUNCTION = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
USER = [{"role": "user", "content": "patch it"}]
HISTORY = USER + [{"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin Patch"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "done"}]
CASES = {
    "tool": ({"messages": USER, "tools": [FUNCTION, CUSTOM]}, "tools[1].type"),
    "tool-choice": ({"messages": USER, "tools": [FUNCTION], "tool_choice": {"type": "custom",
                                                                           "custom": {"name": "apply_patch"}}},
                    "tool_choice.type"),
    "earlier-call": ({"messages": HISTORY, "tools": [FUNCTION]}, "messages[1].tool_calls[0].type"),
}


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/api/v0/chat/completions", "/tokenize"])
@pytest.mark.parametrize("case", CASES, ids=CASES.keys())
async def test_a_custom_tool_is_refused_by_name(stack, route, case):
    client, _ = stack
    body, param = CASES[case]
    response = await client.post(route, json={"model": "fake-model", **body})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == param
    assert "custom (freeform) tools are not served" in error["message"] and "/v1/responses" in error["message"]


async def test_the_responses_api_still_serves_them(stack):
    client, _ = stack
    response = await client.post("/v1/responses", json={
        "model": "fake-model", "input": "patch it", "max_output_tokens": 4,
        "tools": [{"type": "custom", "name": "apply_patch"}]})
    assert response.status == 200 and (await response.json())["tools"][0]["type"] == "custom"
