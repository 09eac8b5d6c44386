"""/v1/responses (fake scheduler): the calls of the tools OpenAI defines and the client runs, replayed in a thread's
later requests (the Agents SDK's ShellTool and ApplyPatchTool send shell_call / shell_call_output and
apply_patch_call / apply_patch_call_output items: openai-python src/openai/types/responses/
response_input_item_param.py ShellCall, ShellCallOutput, ApplyPatchCall, ApplyPatchCallOutput). Each is a call of
`shell` / `apply_patch` whose arguments are its action / operation, its output after it, as a local_shell_call is
(test_responses_openai_side_items.py); they were a 400 "items of type 'shell_call' are not supported"."""
import json

import pytest

from tests.unit.test_responses_openai_side_items import AGAIN, ANSWER, USER, rendered

SHELL_ACTION = {"commands": ["ls -a", "cat notes.txt"], "timeout_ms": 1000, "max_output_length": 4096}
SHELL_RESULT = [{"stdout": "a.txt\nnotes.txt\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
                {"stdout": "", "stderr": "cat: notes.txt: Permission denied", "outcome": {"type": "exit",
                                                                                         "exit_code": 1}}]
PATCH = {"type": "update_file", "path": "src/app.py", "diff": "@@\n-print('hi')\n+print('hello')\n"}
CASES = {
    "shell": ([{"type": "shell_call", "id": "sh_0001", "call_id": "call_1", "status": "completed",
                "action": SHELL_ACTION},
               {"type": "shell_call_output", "id": "sho_0001", "call_id": "call_1", "max_output_length": 4096,
                "output": SHELL_RESULT}],
              "shell", SHELL_ACTION, json.dumps(SHELL_RESULT)),
    "apply_patch": ([{"type": "apply_patch_call", "id": "apc_0001", "call_id": "call_1", "status": "completed",
                      "operation": PATCH},
                     {"type": "apply_patch_call_output", "id": "apo_0001", "call_id": "call_1",
                      "status": "completed", "output": "Updated src/app.py"}],
                    "apply_patch", PATCH, "Updated src/app.py"),
    "apply_patch without output": ([{"type": "apply_patch_call", "call_id": "call_1", "status": "completed",
                                     "operation": {"type": "delete_file", "path": "old.py"}},
                                    {"type": "apply_patch_call_output", "call_id": "call_1", "status": "failed"}],
                                   "apply_patch", {"type": "delete_file", "path": "old.py"}, "failed"),
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("items, name, arguments, output", CASES.values(), ids=CASES.keys())
async def test_a_client_run_tools_call_is_a_call_its_output_follows(stack, items, name, arguments, output, stream):
    client, fake = stack
    replayed = await rendered(client, fake, [USER, *items, ANSWER, AGAIN], stream)
    as_function = [{"type": "function_call", "call_id": "call_1", "name": name, "arguments": json.dumps(arguments)},
                   {"type": "function_call_output", "call_id": "call_1", "output": output}]
    assert replayed == await rendered(client, fake, [USER, *as_function, ANSWER, AGAIN])
    first_value = next(iter(arguments.values()))
    assert replayed.index(f"<function={name}>") < replayed.index(json.dumps(first_value)[1:8]) < replayed.index(
        "<tool_response>") < replayed.index(output[:12]) < replayed.index("Here they are.")


@pytest.mark.parametrize("item, field", [
    ({"type": "shell_call", "call_id": "call_1", "action": "ls"}, "action"),
    ({"type": "apply_patch_call", "call_id": "call_1", "status": "completed"}, "operation"),
])
async def test_a_call_without_its_action_is_a_400(stack, item, field):
    client, _ = stack
    response = await client.post("/v1/responses", json={"model": "fake-model", "input": [USER, item]})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == f"input[1].{field}", error


async def test_an_output_without_its_call_is_a_400(stack):
    client, _ = stack
    orphan = {"type": "shell_call_output", "call_id": "call_9", "output": SHELL_RESULT}
    response = await client.post("/v1/responses", json={"model": "fake-model", "input": [USER, orphan]})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "input[1].call_id", error
