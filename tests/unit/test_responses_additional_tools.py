"""/v1/responses over the fake scheduler: Codex CLI 0.144 and later send no top-level `tools`; their tools come in an
`additional_tools` input item (`{"type": "additional_tools", "role": "developer", "tools": [namespace, ...]}`, OpenAI's
"additional tool definitions made available at this item"), and every Codex session's first request was the 400
"items of type 'additional_tools' are not supported" (mxyhi/token_proxy#307, envoyproxy/ai-gateway#2586; the shapes
are Codex 0.154's recorded wire). Its tools are offered as top-level ones are, namespaces included, and a call to one
comes back as OpenAI returns it (`custom_tool_call` with `namespace: "functions"`, `name: "exec"`)."""
import pytest

from tests.unit.test_responses_api import NO_THINK, post, prompt_of
from tests.unit.test_responses_custom_tools import offered

EXEC = {"type": "custom", "name": "exec", "description": "Run JavaScript", "format": {"type": "text"}}
WAIT = {"type": "function", "name": "wait", "strict": False,
        "parameters": {"type": "object", "properties": {"ms": {"type": "number"}}, "additionalProperties": False}}
ADDITIONAL = {"type": "additional_tools", "id": "at-local", "role": "developer",
              "tools": [{"type": "namespace", "name": "functions", "description": "Local code mode",
                         "tools": [EXEC, WAIT]}]}
USER = {"role": "user", "content": [{"type": "input_text", "text": "Inspect the local fixture."}]}
SHELL = {"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}}
CALL = "<tool_call>\n<function=functions__exec>\n<parameter=input>\ntext(1);\n</parameter>\n</function>\n</tool_call>"


def body(*items, **fields) -> dict:
    return {"model": "fake-model", "input": list(items), "max_output_tokens": 64, "store": False,
            "include": ["reasoning.encrypted_content"], "tool_choice": "auto", "parallel_tool_calls": False, **NO_THINK,
            **fields}


async def test_its_tools_are_offered_and_called_as_openai_returns_them(stack):
    client, fake = stack
    fake.script.reply = CALL
    status, response = await post(client, body(ADDITIONAL, USER))
    assert status == 200, response
    functions = offered(prompt_of(fake))
    assert list(functions) == ["functions__exec", "functions__wait"]
    assert functions["functions__exec"]["description"] == "Run JavaScript"
    assert functions["functions__wait"]["parameters"] == WAIT["parameters"]
    [call] = response["output"]
    assert (call["type"], call["namespace"], call["name"], call["input"]) == (
        "custom_tool_call", "functions", "exec", "text(1);")


async def test_the_next_turn_replays_the_call_and_its_output(stack):
    client, fake = stack
    call = {"type": "custom_tool_call", "call_id": "call-1", "name": "exec", "namespace": "functions",
            "input": "text(1);", "status": "completed"}
    output = {"type": "custom_tool_call_output", "call_id": "call-1",
              "output": [{"type": "input_text", "text": "FIXTURE_OK"}]}
    status, response = await post(client, body(ADDITIONAL, USER, call, output))
    assert status == 200 and response["output"][0]["content"][0]["text"] == "Hello world", response
    prompt = prompt_of(fake)
    assert "<function=functions__exec>\n<parameter=input>\ntext(1);" in prompt
    assert "<tool_response>\nFIXTURE_OK\n</tool_response>" in prompt


async def test_they_join_the_top_level_tools(stack):
    client, fake = stack
    status, response = await post(client, body(USER, ADDITIONAL, tools=[SHELL]))
    assert status == 200, response
    assert list(offered(prompt_of(fake))) == ["shell", "functions__exec", "functions__wait"]
    assert [tool["name"] for tool in response["tools"]] == ["shell"]


@pytest.mark.parametrize("tools, param", [
    ("exec", "input[0].tools"),
    ([{"name": "exec"}], "input[0].tools[0].type"),
    ([SHELL, {"type": "function", "parameters": {}}], "input[0].tools[1].name"),
], ids=["not a list", "no type", "no name"])
async def test_a_malformed_one_is_the_400_that_names_it(stack, tools, param):
    client, fake = stack
    status, response = await post(client, body({"type": "additional_tools", "tools": tools}, USER))
    assert status == 400 and response["error"]["param"] == param, response
    assert fake.script.requests == []
