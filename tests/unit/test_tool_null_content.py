"""A tool message whose content is null (or absent: a tool that returned nothing) is an empty result, as vLLM reads a
null content (no parts, ""), instead of the 400 "messages[2].content is required for role 'tool'"; /apply-template
already rendered it so. Other roles keep the 400 (fake scheduler)."""
import pytest

TOOLS = [{"type": "function", "function": {"name": "touch", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}}}}]
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "touch", "arguments": '{"path": "a"}'}}]}
USER = {"role": "user", "content": "run it"}


def prompt_of(fake) -> str:
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions"])
@pytest.mark.parametrize("result", [{"content": None}, {}], ids=["null", "absent"])
async def test_a_tool_result_without_content_is_an_empty_result(stack, path, result):
    client, fake = stack
    prompts = []
    empty = {"role": "tool", "tool_call_id": "c1", "content": ""}
    for tool in ({"role": "tool", "tool_call_id": "c1", **result}, empty):
        response = await client.post(path, json={"messages": [USER, CALL, tool], "tools": TOOLS})
        assert response.status == 200, await response.text()
        prompts.append(prompt_of(fake))
    assert prompts[0] == prompts[1] and "<tool_response>\n\n</tool_response>" in prompts[0]


async def test_a_user_message_without_content_is_still_refused(stack):
    client, fake = stack
    response = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": None}]})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "messages[0].content", error
    assert fake.script.requests == []
