"""Gateway over the fake scheduler: a tool_result must answer a tool_use of the assistant turn just before it, as
Anthropic's Messages API checks it; one that answers no call is its 400, never rendered as a tool response."""
import pytest

from tests.unit.test_anthropic_errors import BAD_MESSAGES, BASE, TOOL, USER, expect_error

CALL = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}


def result(tool_use_id: str) -> dict:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": "Sunny"}]}


def unexpected(where: str, tool_use_id: str) -> str:
    # Anthropic's words (quoted in anthropics/claude-code#13460 and router-for-me/CLIProxyAPI#497).
    return (f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {tool_use_id}. Each `tool_result` "
            f"block must have a corresponding `tool_use` block in the previous message.")


@pytest.mark.parametrize("messages, where, tool_use_id", [
    ([*USER, {"role": "assistant", "content": "Let me look."}, result("toolu_zzz")], "messages.2.content.0",
     "toolu_zzz"),
    ([*USER, {"role": "assistant", "content": [CALL]}, result("toolu_2")], "messages.2.content.0", "toolu_2"),
    ([result("toolu_1")], "messages.0.content.0", "toolu_1"),
    ([*USER, {"role": "assistant", "content": [CALL]}, result("toolu_1"), {"role": "assistant", "content": "Sunny."},
      result("toolu_1")], "messages.4.content.0", "toolu_1"),
], ids=["after a text turn", "another id", "first message", "a call two turns back"])
async def test_a_tool_result_answering_no_call_is_anthropics_400(stack, messages, where, tool_use_id):
    client, fake = stack
    body = {**BASE, "tools": [TOOL], "messages": messages}
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        error = await expect_error(await client.post(path, json=body), 400, BAD_MESSAGES, where)
        assert error["error"]["message"] == unexpected(where, tool_use_id)
    await expect_error(await client.post("/v1/messages", json={**body, "stream": True}), 400, BAD_MESSAGES, where)
    assert fake.script.requests == []


@pytest.mark.parametrize("messages", [
    [*USER, {"role": "assistant", "content": [CALL]}, result("toolu_1")],
    [*USER, {"role": "assistant", "content": [CALL]}, {"role": "system", "content": "Be brief."}, result("toolu_1")],
], ids=["answering the call", "a system message between"])
async def test_a_tool_result_answering_the_call_before_it_is_served(stack, messages):
    client, fake = stack
    fake.script.reply = "It is sunny."
    response = await client.post("/v1/messages", json={**BASE, "tools": [TOOL], "messages": messages})
    assert response.status == 200, await response.text()
    assert (await response.json())["content"] == [{"type": "text", "text": "It is sunny."}]


async def test_a_tool_use_with_a_null_input_is_a_call_without_arguments(stack):
    """A tool_use block sent back with "input": null (typed dict | None by vLLM's AnthropicContentBlock, which reads it
    as {}) is a call without arguments, as one without input is; it was the 400 "input: must be an object". An input
    that is neither an object nor null stays a 400."""
    client, fake = stack
    prompts = []
    for call in ({**CALL, "input": {}}, {**CALL, "input": None}, {k: v for k, v in CALL.items() if k != "input"}):
        body = {**BASE, "tools": [TOOL], "messages": [*USER, {"role": "assistant", "content": [call]},
                                                      result("toolu_1")]}
        response = await client.post("/v1/messages", json=body)
        assert response.status == 200, await response.text()
        prompts.append(fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids)))
    assert prompts[0] == prompts[1] == prompts[2]
    listed = {**CALL, "input": ["Paris"]}
    body = {**BASE, "tools": [TOOL], "messages": [*USER, {"role": "assistant", "content": [listed]}, result("toolu_1")]}
    await expect_error(await client.post("/v1/messages", json=body), 400, BAD_MESSAGES, "messages.1.content.0.input")
