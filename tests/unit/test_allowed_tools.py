"""OpenAI's tool_choice allowed_tools (fake scheduler): every tool stays in the prompt, and the model may call only the
listed ones, "required" forcing one of them. It was a 400 that misread the request ("invalid value for
'tool_choice.type': 'function' was expected") on /v1/chat/completions, and "not supported" on /v1/responses."""
import orjson
import pytest

USER = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}}}} for name in ("lookup", "delete_all")]


def call(name: str) -> str:
    return f"<tool_call>\n<function={name}>\n<parameter=q>\nx\n</parameter>\n</function>\n</tool_call>"


def allowed(mode: str, *names: str) -> dict:
    return {"type": "allowed_tools", "allowed_tools": {
        "mode": mode, "tools": [{"type": "function", "function": {"name": name}} for name in names]}}


async def chat(client, **fields) -> tuple[int, dict]:
    response = await client.post("/v1/chat/completions", data=orjson.dumps({"messages": USER, "tools": TOOLS,
                                                                            **fields}))
    return response.status, await response.json()


async def test_required_forces_a_call_to_an_allowed_tool(stack):
    client, fake = stack
    fake.script.reply = call("lookup")
    status, body = await chat(client, tool_choice=allowed("required", "lookup"))
    assert status == 200 and body["choices"][0]["finish_reason"] == "tool_calls"
    assert [c["function"] for c in body["choices"][0]["message"]["tool_calls"]] == [
        {"name": "lookup", "arguments": '{"q":"x"}'}]
    grammar = fake.script.requests[0].constraint.grammar
    assert "<function=lookup>" in grammar and "delete_all" not in grammar


async def test_auto_keeps_every_tool_in_the_prompt_and_parses_only_the_allowed_calls(stack):
    client, fake = stack
    fake.script.reply = call("lookup")
    status, body = await chat(client, tool_choice=allowed("auto", "lookup"), enable_thinking=False)
    assert status == 200 and body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "lookup"
    await chat(client, enable_thinking=False)
    assert fake.script.requests[0].prompt_token_ids == fake.script.requests[1].prompt_token_ids
    assert not fake.script.requests[0].HasField("constraint")
    fake.script.reply = call("delete_all")
    status, body = await chat(client, tool_choice=allowed("auto", "lookup"), enable_thinking=False)
    assert status == 200 and body["choices"][0]["finish_reason"] == "stop"
    assert body["choices"][0]["message"]["content"] == call("delete_all") and "tool_calls" not in body["choices"][0][
        "message"]


@pytest.mark.parametrize("choice, error", [
    (allowed("auto", "nope"), ("tool_choice.allowed_tools.tools[0].function.name", "invalid_value",
                               "tool_choice.allowed_tools.tools[0] names the function 'nope', which is not in tools")),
    ({"type": "allowed_tools", "allowed_tools": {"mode": "always", "tools": [{"type": "function", "function": {
        "name": "lookup"}}]}},
     ("tool_choice.allowed_tools.mode", "invalid_value",
      'invalid value for \'tool_choice.allowed_tools.mode\': "always" is not one of ["auto", "required"]')),
    ({"type": "allowed_tools", "allowed_tools": {"mode": "auto"}},
     ("tool_choice.allowed_tools.tools", "missing_required_parameter",
      "'tool_choice.allowed_tools.tools' is a required property")),
], ids=["unknown-name", "bad-mode", "no-tools"])
async def test_a_bad_allowed_tools_is_named(stack, choice, error):
    client, fake = stack
    status, body = await chat(client, tool_choice=choice)
    assert status == 400 and body == {"error": {"message": error[2], "type": "invalid_request_error",
                                                "param": error[0], "code": error[1]}}
    assert fake.script.requests == []


RESPONSES_TOOLS = [{"type": "web_search"}] + [{"type": "function", "name": t["function"]["name"],
                                               "parameters": t["function"]["parameters"]} for t in TOOLS]


async def responses(client, choice: dict) -> tuple[int, dict]:
    response = await client.post("/v1/responses", data=orjson.dumps({"input": "hi", "tools": RESPONSES_TOOLS,
                                                                     "tool_choice": choice}))
    return response.status, await response.json()


async def test_responses_allowed_tools(stack):
    """The Responses API's form (mode and tools at its top); the hosted tools it lists are not served, so with no
    function listed "auto" allows no call and "required" is a 400 that says why."""
    client, fake = stack
    fake.script.reply = call("lookup")
    status, body = await responses(client, {"type": "allowed_tools", "mode": "required", "tools": [
        {"type": "web_search"}, {"type": "function", "name": "lookup"}]})
    assert status == 200 and [(o["type"], o["name"]) for o in body["output"]] == [("function_call", "lookup")]
    assert "delete_all" not in fake.script.requests[0].constraint.grammar
    assert body["tool_choice"] == {"type": "allowed_tools", "mode": "required", "tools": [
        {"type": "web_search"}, {"type": "function", "name": "lookup"}]}
    status, body = await responses(client, {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "web_search"}]})
    assert status == 200 and [o["type"] for o in body["output"]] == ["message"]     # the call stays text
    status, body = await responses(client, {"type": "allowed_tools", "mode": "required", "tools": [
        {"type": "web_search"}, {"type": "function", "name": "nope"}]})
    assert status == 400 and body["error"] == {
        "message": "tool_choice.tools names the function 'nope', which is not in tools",
        "type": "invalid_request_error", "param": "tool_choice.tools", "code": "invalid_value"}
    status, body = await responses(client, {"type": "allowed_tools", "mode": "required",
                                            "tools": [{"type": "web_search"}]})
    assert status == 400 and body["error"]["param"] == "tool_choice.tools" and body["error"]["message"] == (
        "tool_choice.tools lists no function tool, and only function tools are served: 'required' cannot be met")
