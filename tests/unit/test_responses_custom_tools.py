"""/v1/responses over the fake scheduler: a freeform `custom` tool (Codex CLI's apply_patch) is offered as a function
of one string parameter, `input`, and its call comes back as a custom_tool_call item of that string, streamed with
OpenAI's custom_tool_call_input events; custom_tool_call and custom_tool_call_output items go back into the prompt
(it was left out of the prompt, so Codex could not patch a file)."""
import json

import pytest
from openai.types.responses import Response, ResponseCustomToolCall, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.unit.test_responses_api import NO_THINK, TOOLS, post, prompt_of, stream

PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch"
LARK = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF'
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files with a patch.",
               "format": {"type": "grammar", "syntax": "lark", "definition": LARK}}
CALL = f"<tool_call>\n<function=apply_patch>\n<parameter=input>\n{PATCH}\n</parameter>\n</function>\n</tool_call>"
BODY = {"model": "fake-model", "input": "Add hello.txt", "tools": [APPLY_PATCH, *TOOLS], "max_output_tokens": 400,
        **NO_THINK}


def offered(prompt: str) -> dict:
    """The functions the prompt's tool list offers, by name."""
    listed = prompt.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    return {tool["function"]["name"]: tool["function"] for tool in map(json.loads, listed.splitlines())}


async def test_a_custom_tool_is_offered_as_a_function_of_its_input(stack):
    client, fake = stack
    status, body = await post(client, BODY)
    assert status == 200, body
    function = offered(prompt_of(fake))["apply_patch"]
    assert function["description"] == "Edit files with a patch."
    assert function["parameters"]["required"] == ["input"]
    assert list(function["parameters"]["properties"]) == ["input"]
    assert LARK in function["parameters"]["properties"]["input"]["description"]
    assert body["tools"][0] == APPLY_PATCH


async def test_its_call_is_a_custom_tool_call_item_streamed_or_not(stack):
    client, fake = stack
    fake.script.reply = CALL
    status, body = await post(client, BODY)
    assert status == 200, body
    [item] = Response.model_validate(body).output
    assert isinstance(item, ResponseCustomToolCall) and item.id.startswith("ctc_")
    assert (item.name, item.input, item.call_id.startswith("call_")) == ("apply_patch", PATCH, True)
    assert "arguments" not in body["output"][0]
    events = await stream(client, BODY)
    for _, data in events:
        TypeAdapter(ResponseStreamEvent).validate_python(data)
    names = [name for name, _ in events]
    assert names[2:] == ["response.output_item.added", "response.custom_tool_call_input.delta",
                         "response.custom_tool_call_input.done", "response.output_item.done", "response.completed"]
    added, delta, done, item_done = (data for _, data in events[2:6])
    assert added["item"]["type"] == "custom_tool_call" and added["item"]["input"] == ""
    assert delta["delta"] == PATCH and done["input"] == PATCH and delta["item_id"] == added["item"]["id"]
    assert item_done["item"] == events[-1][1]["response"]["output"][0]
    assert {key: value for key, value in item_done["item"].items() if key not in ("id", "call_id")} == {
        key: value for key, value in body["output"][0].items() if key not in ("id", "call_id")}


async def test_custom_tool_call_and_output_items_go_back_into_the_prompt(stack):
    client, fake = stack
    fake.script.reply = "Added."
    status, body = await post(client, {**BODY, "input": [
        {"role": "user", "content": "Add hello.txt"},
        {"type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Success. Updated: A hello.txt"}]})
    assert status == 200 and body["output"][0]["content"][0]["text"] == "Added.", body
    assert ("<|im_start|>assistant\n<think>\n\n</think>\n\n" + CALL + "<|im_end|>\n<|im_start|>user\n<tool_response>\n"
            "Success. Updated: A hello.txt\n</tool_response><|im_end|>") in prompt_of(fake)


@pytest.mark.parametrize("choice", [
    {"type": "custom", "name": "apply_patch"},
    {"type": "allowed_tools", "mode": "required", "tools": [{"type": "custom", "name": "apply_patch"}]},
], ids=["named", "allowed tools"])
async def test_tool_choice_may_name_a_custom_tool(stack, choice):
    client, fake = stack
    fake.script.reply = CALL
    status, body = await post(client, {**BODY, "tool_choice": choice})
    assert status == 200, body
    assert [(item["type"], item["input"]) for item in body["output"]] == [("custom_tool_call", PATCH)]
    assert body["tool_choice"] == choice


async def test_a_custom_tool_in_a_namespace_is_called_with_its_namespace(stack):
    """Inside a namespace (how Codex declares an MCP server) a custom tool is offered under its flat name, as the
    namespace's functions are, and its call comes back with namespace and name apart (ResponseCustomToolCall's
    namespace)."""
    client, fake = stack
    namespace = {"type": "namespace", "name": "mcp__repo", "description": "Repository tools",
                 "tools": [{"type": "custom", "name": "patch", "format": {"type": "text"}}]}
    fake.script.reply = CALL.replace("apply_patch", "mcp__repo__patch")
    status, body = await post(client, {**BODY, "tools": [namespace]})
    assert status == 200, body
    function = offered(prompt_of(fake))["mcp__repo__patch"]
    assert function["description"] == "Repository tools" and function["parameters"]["required"] == ["input"]
    [item] = body["output"]
    assert (item["type"], item["namespace"], item["name"], item["input"]) == ("custom_tool_call", "mcp__repo",
                                                                              "patch", PATCH)
    fake.script.reply = "Done."
    status, body = await post(client, {**BODY, "tools": [namespace], "input": [
        {"role": "user", "content": "Add hello.txt"}, item,
        {"type": "custom_tool_call_output", "call_id": item["call_id"], "output": "ok"}]})
    assert status == 200, body
    assert CALL.replace("apply_patch", "mcp__repo__patch") + "<|im_end|>" in prompt_of(fake)
