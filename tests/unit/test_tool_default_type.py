"""A tool, or a named tool_choice, that leaves out "type" is a function one, as vLLM's ChatCompletionToolsParam and
ChatCompletionNamedToolChoiceParam default it (type: Literal["function"] = "function"); it was OpenAI's 400
"'tools[0].type' is a required property" on /v1 chat, /api/v0, /tokenize and /apply-template (fake scheduler)."""
import orjson
import pytest

from tests.unit.tool_deltas import first_call_arguments

REPLY = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
FUNCTION = {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
USER = [{"role": "user", "content": "weather?"}]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions"])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_without_type_is_a_function_tool(stack, path, stream):
    client, _ = stack
    body = {"model": "fake-model", "messages": USER, "tools": [{"function": FUNCTION}], "stream": stream}
    response = await client.post(path, json=body)
    raw = await response.read()
    assert response.status == 200, raw
    assert orjson.loads(first_call_arguments(raw, stream)) == {"city": "Paris"}


async def test_a_named_tool_choice_without_type_forces_that_function(stack):
    client, fake = stack
    body = {"model": "fake-model", "messages": USER, "tools": [{"type": "function", "function": FUNCTION}],
            "tool_choice": {"function": {"name": "get_weather"}}}
    response = await client.post("/v1/chat/completions", json=body)
    answer = await response.json()
    assert response.status == 200, answer
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert "<function=get_weather>" in fake.script.requests[-1].constraint.grammar


@pytest.mark.parametrize("path, key", [("/tokenize", "count"), ("/apply-template", "prompt")])
async def test_the_prompt_is_the_typed_tools(stack, path, key):
    client, _ = stack
    answers = []
    for tool in ({"function": FUNCTION}, {"type": "function", "function": FUNCTION}):
        response = await client.post(path, json={"model": "fake-model", "messages": USER, "tools": [tool]})
        assert response.status == 200, await response.text()
        answers.append((await response.json())[key])
    assert answers[0] == answers[1]


async def test_another_type_is_still_refused(stack):
    client, _ = stack
    body = {"model": "fake-model", "messages": USER, "tools": [{"type": "retrieval", "function": FUNCTION}]}
    response = await client.post("/v1/chat/completions", json=body)
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "tools[0].type", error
