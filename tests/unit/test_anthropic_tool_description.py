"""Gateway over the fake scheduler: a /v1/messages tool sent without a description (Anthropic's description is
optional; MCP servers leave it out) is offered in the prompt as the same function sent to /v1/chat/completions without
one, token for token; it was rendered with "description": null, a line the model never sees for that tool on /v1."""
import pytest

from tests.unit.test_anthropic_messages import BASE, SCHEMA, USER, chat_prompt

WITH = {"name": "get_weather", "description": "Weather of a city", "input_schema": SCHEMA}
WITHOUT = {"name": "get_weather", "input_schema": SCHEMA}
NULL = {**WITHOUT, "description": None}


def as_function(tool: dict) -> dict:
    """The OpenAI function a client of /v1 sends for an Anthropic tool: the keys it has, renamed."""
    described = {"description": tool["description"]} if tool.get("description") is not None else {}
    return {"type": "function", "function": {"name": tool["name"], **described, "parameters": tool["input_schema"]}}


@pytest.mark.parametrize("tool", [WITHOUT, NULL, WITH, {**WITHOUT, "description": ""}],
                         ids=["absent", "null", "described", "empty"])
async def test_the_prompt_is_the_chat_routes(stack, tool):
    client, fake = stack
    response = await client.post("/v1/messages", json={**BASE, "tools": [tool]})
    assert response.status == 200, await response.text()
    ids = list(fake.script.requests[-1].prompt_token_ids)
    chat = {"messages": USER, "tools": [as_function(tool)], "enable_thinking": False}
    assert ids == await chat_prompt(client, fake, chat)
    assert "null" not in fake.tokenizer.decode(ids, skip_special_tokens=False)
    counted = await client.post("/v1/messages/count_tokens", json={"model": BASE["model"], "messages": USER,
                                                                   "tools": [tool], "thinking": BASE["thinking"]})
    assert await counted.json() == {"input_tokens": len(ids)}
