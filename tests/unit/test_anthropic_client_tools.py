"""Gateway over the fake scheduler: Anthropic-defined client tools (bash_*, text_editor_*, memory_*), which a request
names by type without input_schema, are offered to the model with their documented inputs and called back as
tool_use blocks; Anthropic's server tools and computer use stay a 400 that names the type."""
import json
import re

import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from tests.unit.test_anthropic_errors import BAD_MESSAGES, expect_error
from tests.unit.test_anthropic_messages import BASE, TOOLS, both, prompt_of

BASH = {"type": "bash_20250124", "name": "bash"}
EDITOR = {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool", "max_characters": 10000}
OLD_EDITOR = {"type": "text_editor_20250124", "name": "str_replace_editor"}
MEMORY = {"type": "memory_20250818", "name": "memory"}


@pytest.fixture
async def stack():
    """conftest's stack with room for five tools' definitions in the fake byte-level tokenizer's tokens."""
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=16384)) as pair:
        yield pair


def offered(prompt: str) -> dict:
    """The functions the prompt's tool list offers, by name."""
    listed = re.search(r"<tools>\n(.*?)\n</tools>", prompt, re.S).group(1)
    return {tool["function"]["name"]: tool["function"] for tool in map(json.loads, listed.splitlines())}


async def test_client_tools_are_offered_with_their_inputs(stack):
    client, fake = stack
    response = await client.post("/v1/messages", json={**BASE, "tools": [BASH, EDITOR, OLD_EDITOR, MEMORY, *TOOLS]})
    assert response.status == 200, await response.text()
    functions = offered(prompt_of(fake))
    assert list(functions) == ["bash", "str_replace_based_edit_tool", "str_replace_editor", "memory", "get_weather"]
    assert set(functions["bash"]["parameters"]["properties"]) == {"command", "restart"}
    editor = functions["str_replace_based_edit_tool"]["parameters"]
    # Anthropic's text editor docs: text_editor_20250728 has no undo_edit; insert takes insert_line and new_str.
    assert editor["properties"]["command"]["enum"] == ["view", "create", "str_replace", "insert"]
    assert {"path", "file_text", "old_str", "new_str", "insert_line", "view_range"} <= set(editor["properties"])
    assert editor["required"] == ["command"]
    assert "undo_edit" in functions["str_replace_editor"]["parameters"]["properties"]["command"]["enum"]
    memory = functions["memory"]["parameters"]["properties"]
    assert memory["command"]["enum"] == ["view", "create", "str_replace", "insert", "delete", "rename"]
    assert {"insert_text", "old_path", "new_path"} <= set(memory)
    assert all(function["description"] for function in functions.values())
    assert functions["get_weather"] == {"name": "get_weather", "description": "Weather of a city",
                                        "parameters": TOOLS[0]["input_schema"]}


async def test_a_client_tool_call_is_a_tool_use_block(stack):
    client, fake = stack
    fake.script.reply = ("<tool_call>\n<function=str_replace_based_edit_tool>\n<parameter=command>\nview\n</parameter>\n"
                         "<parameter=path>\n/repo/a.py\n</parameter>\n<parameter=view_range>\n[1, 20]\n</parameter>\n"
                         "</function>\n</tool_call>")
    whole, streamed = await both(client, {**BASE, "max_tokens": 512, "tools": [BASH, EDITOR]})
    for message in (whole, streamed):
        assert message["stop_reason"] == "tool_use"
        [block] = message["content"]
        assert block["type"] == "tool_use" and block["name"] == "str_replace_based_edit_tool"
        assert block["input"] == {"command": "view", "path": "/repo/a.py", "view_range": [1, 20]}


async def test_a_description_sent_with_a_client_tool_is_kept_and_count_tokens_counts_them(stack):
    client, fake = stack
    await client.post("/v1/messages", json={**BASE, "tools": [{**BASH, "description": "Run it in the sandbox."}]})
    assert offered(prompt_of(fake))["bash"]["description"] == "Run it in the sandbox."
    body = {key: BASE[key] for key in ("model", "messages")}
    alone = await (await client.post("/v1/messages/count_tokens", json=body)).json()
    with_tools = await (await client.post("/v1/messages/count_tokens", json={**body, "tools": [BASH, EDITOR]})).json()
    assert with_tools["input_tokens"] > alone["input_tokens"] + 100


@pytest.mark.parametrize("tool", [
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
    {"type": "web_fetch_20250910", "name": "web_fetch"},
    {"type": "code_execution_20250825", "name": "code_execution"},
    {"type": "computer_20250124", "name": "computer", "display_width_px": 1024, "display_height_px": 768},
    # The MCP connector's toolset (BetaMCPToolsetParam) names its server and no tool: it was "tools.1.name: Field
    # required", as if the client had left a name out.
    {"type": "mcp_toolset", "mcp_server_name": "docs", "default_config": {"enabled": True}},
], ids=["web search", "web fetch", "code execution", "computer use", "mcp toolset"])
async def test_server_tools_and_computer_use_are_refused(stack, tool):
    client, fake = stack
    body = {**BASE, "tools": [*TOOLS, tool]}
    fragment = f"tools.1.type: tool type '{tool['type']}' is not supported"
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        await expect_error(await client.post(path, json=body), 400, BAD_MESSAGES, fragment)
    assert fake.script.requests == []


async def test_the_mcp_connector_is_refused_as_such(stack):
    """mcp_servers with the mcp_toolset that offers their tools (Anthropic's MCP connector, the mcp-client beta): the
    400 says the connector is not served, where the toolset's missing name was reported first."""
    client, fake = stack
    body = {**BASE, "mcp_servers": [{"type": "url", "url": "https://mcp.example.com/sse", "name": "docs"}],
            "tools": [{"type": "mcp_toolset", "mcp_server_name": "docs"}]}
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        await expect_error(await client.post(path, json=body), 400, BAD_MESSAGES,
                           "mcp_servers: the MCP connector is not supported")
    assert fake.script.requests == []
