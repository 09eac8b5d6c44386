"""/v1/responses (fake scheduler): the items of a thread begun with OpenAI that a client replays when it resumes or
hands it off (Codex resends its whole history: openai/codex#45401, a compacted session resumed with another Responses
provider, failed every request with "item type \\"compaction\\" is not supported"). Those only OpenAI's side can act on
(hosted tools' calls, tool search, compaction) are left out of the prompt, as Codex's Chat Completions request leaves
them out; a local_shell_call (the client runs it) is a call of `local_shell` that its output follows."""
import json

import pytest

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Find the docs."}]}
ANSWER = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Here they are."}]}
AGAIN = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go on."}]}
OPENAI_SIDE = {
    "compaction": [{"type": "compaction", "id": "cmp_0001", "encrypted_content": "gAAAAABopaque"}],
    "web search": [{"type": "web_search_call", "id": "ws_0001", "status": "completed",
                    "action": {"type": "search", "query": "sparkinfer docs"}}],
    "image generation": [{"type": "image_generation_call", "id": "ig_0001", "status": "completed", "result": "aGk="}],
    "file search": [{"type": "file_search_call", "id": "fs_0001", "status": "completed", "queries": ["docs"]}],
    "code interpreter": [{"type": "code_interpreter_call", "id": "ci_0001", "status": "completed", "code": "1+1",
                          "container_id": "cntr_1", "outputs": None}],
    "tool search": [{"type": "tool_search_call", "id": "tsc_0001", "call_id": "ts_1", "execution": "client",
                     "status": "completed", "arguments": {"query": "calendar"}},
                    {"type": "tool_search_output", "id": "tso_0001", "call_id": "ts_1", "execution": "client",
                     "status": "completed", "tools": [{"type": "function", "name": "calendar_create",
                                                       "parameters": {"type": "object", "properties": {}}}]}],
    # A remote MCP server's items (OpenAI's McpListTools, McpApprovalRequest / Response, McpCall input items), which a
    # client replays after a response that used an `mcp` tool; the tool itself is left out here.
    "remote mcp": [{"type": "mcp_list_tools", "id": "mcpl_0001", "server_label": "calendar",
                    "tools": [{"name": "calendar_create", "input_schema": {"type": "object"}}]},
                   {"type": "mcp_approval_request", "id": "mcpr_0001", "server_label": "calendar",
                    "name": "calendar_create", "arguments": "{\"title\": \"sparkinfer docs\"}"},
                   {"type": "mcp_approval_response", "approval_request_id": "mcpr_0001", "approve": True},
                   {"type": "mcp_call", "id": "mcp_0001", "server_label": "calendar", "name": "calendar_create",
                    "arguments": "{\"title\": \"sparkinfer docs\"}", "output": "opaque", "status": "completed"}],
    "compaction trigger": [{"type": "compaction_trigger", "id": "ct_0001"}],
    # Programmatic tool calling (openai-python 3.57 ResponseInputItemParam Program / ProgramOutput): the JavaScript
    # OpenAI's side ran; they were the 400 "items of type 'program' are not supported".
    "program": [{"type": "program", "id": "prg_0001", "call_id": "pc_1", "code": "await tools.find('docs')",
                 "fingerprint": "opaque"},
                {"type": "program_output", "id": "prgo_0001", "call_id": "pc_1", "result": "sparkinfer docs",
                 "status": "completed"}],
}


def prompt_of(fake) -> str:
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


async def rendered(client, fake, items: list, stream: bool = False) -> str:
    body = {"model": "fake-model", "input": items, "stream": stream}
    response = await client.post("/v1/responses", json=body)
    assert response.status == 200, await response.text()
    await response.read()
    prompt = prompt_of(fake)
    counted = await (await client.post("/v1/responses/input_tokens", json=body)).json()
    assert counted["input_tokens"] == len(fake.script.requests[-1].prompt_token_ids)
    return prompt


@pytest.mark.parametrize("items", OPENAI_SIDE.values(), ids=OPENAI_SIDE.keys())
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_item_of_openais_side_is_left_out(stack, items, stream):
    client, fake = stack
    replayed = await rendered(client, fake, [USER, *items, ANSWER, AGAIN], stream)
    assert replayed == await rendered(client, fake, [USER, ANSWER, AGAIN])
    assert "Find the docs.<|im_end|>" in replayed and "Here they are." in replayed and "Go on.<|im_end|>" in replayed
    assert "opaque" not in replayed and "calendar" not in replayed and "sparkinfer docs" not in replayed


ACTION = {"type": "exec", "command": ["ls", "-a"], "timeout_ms": 1000, "working_directory": None, "env": None,
          "user": None}
SHELL = {"type": "local_shell_call", "id": "lsh_0001", "call_id": "call_1", "status": "completed", "action": ACTION}


@pytest.mark.parametrize("output", [
    {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
    {"type": "local_shell_call_output", "id": "call_1", "output": "a.txt"},
], ids=["codex function_call_output", "local_shell_call_output"])
async def test_a_local_shell_call_is_a_call_its_output_follows(stack, output):
    client, fake = stack
    replayed = await rendered(client, fake, [USER, SHELL, output, ANSWER, AGAIN])
    as_function = {"type": "function_call", "call_id": "call_1", "name": "local_shell", "arguments": json.dumps(ACTION)}
    plain_output = {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"}
    assert replayed == await rendered(client, fake, [USER, as_function, plain_output, ANSWER, AGAIN])
    assert replayed.index("<function=local_shell>") < replayed.index("-a") < replayed.index(
        "<tool_response>\na.txt\n</tool_response>") < replayed.index("Here they are.")


async def test_a_local_shell_call_without_its_action_is_a_400(stack):
    client, _ = stack
    body = {"model": "fake-model", "input": [USER, {**SHELL, "action": "ls"}]}
    response = await client.post("/v1/responses", json=body)
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "input[1].action", error
