"""Gateway over the fake scheduler: Anthropic tool use on /v1/messages: a tool_use / tool_result round trip,
tool_choice forcing a call, thinking refused beside a forced call, disable_parallel_tool_use (the answers and
prompts: test_anthropic_messages.py, whose helpers these share)."""
import pytest

from tests.unit.test_anthropic_messages import (BASE, CALL, ON, OPENAI_TOOLS, TOOLS, USER, both, chat_prompt, prompt_of,
                                                without_ids)


async def test_tool_use_round_trip(stack):
    client, fake = stack
    fake.script.reply = CALL
    first = await (await client.post("/v1/messages", json={**BASE, "tools": TOOLS})).json()
    assert first["stop_reason"] == "tool_use" and len(first["content"]) == 1
    call = first["content"][0]
    assert call["type"] == "tool_use" and call["input"] == {"city": "Paris"}
    fake.script.reply = "It is sunny."
    turn = [*USER, {"role": "assistant", "content": first["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"],
                                          "content": [{"type": "text", "text": "Sunny, 21 C"}]},
                                         {"type": "text", "text": "Thanks"}]}]
    second = await (await client.post("/v1/messages", json={**BASE, "tools": TOOLS, "messages": turn})).json()
    assert second["content"] == [{"type": "text", "text": "It is sunny."}] and second["stop_reason"] == "end_turn"
    prompt = prompt_of(fake)
    assert "<function=get_weather>\n<parameter=city>\nParis\n</parameter>" in prompt
    assert "<tool_response>\nSunny, 21 C\n</tool_response>" in prompt and prompt.index("Sunny") < prompt.index("Thanks")
    ids = list(fake.script.requests[-1].prompt_token_ids)
    tool_call = {"id": call["id"], "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    chat = {"tools": OPENAI_TOOLS, "enable_thinking": False, "messages": [
        *USER, {"role": "assistant", "content": None, "tool_calls": [tool_call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "Sunny, 21 C"}, {"role": "user", "content": "Thanks"}]}
    assert ids == await chat_prompt(client, fake, chat)


@pytest.mark.parametrize("choice, forced", [
    ({"type": "any"}, True), ({"type": "tool", "name": "get_weather"}, True), ({"type": "auto"}, False),
], ids=["any", "named", "auto"])
async def test_tool_choice_forces_a_call(stack, choice, forced):
    client, fake = stack
    fake.script.reply = CALL
    # thinking left to the model's default (on here); an explicit thinking with a forced choice is a 400 (below).
    request = {key: value for key, value in BASE.items() if key != "thinking"}
    body = await (await client.post("/v1/messages", json={**request, "tools": TOOLS, "tool_choice": choice})).json()
    assert body["stop_reason"] == "tool_use" and body["content"][0]["input"] == {"city": "Paris"}
    request = fake.script.requests[-1]
    assert bool(request.constraint.grammar) is forced
    # A forced call is the whole turn: no thinking first, as on /v1.
    assert prompt_of(fake).endswith("</think>\n\n") is forced


@pytest.mark.parametrize("thinking", [ON, {"type": "enabled", "budget_tokens": 1024}], ids=["adaptive", "enabled"])
@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "get_weather"}], ids=["any", "named"])
@pytest.mark.parametrize("route", ["/v1/messages", "/v1/messages/count_tokens"])
async def test_thinking_with_a_forced_tool_choice_is_refused(stack, thinking, choice, route):
    """Anthropic's extended-thinking docs: with thinking, tool_choice may only be auto or none; any or tool is the
    400 'Thinking may not be enabled when tool_choice forces tool use.'. It was accepted with thinking turned off."""
    client, fake = stack
    body = {**BASE, "max_tokens": 2048, "thinking": thinking, "tools": TOOLS, "tool_choice": choice}
    response = await client.post(route, json=body)
    assert response.status == 400
    answer = await response.json()
    assert answer["type"] == "error" and answer["error"] == {
        "type": "invalid_request_error", "message": "Thinking may not be enabled when tool_choice forces tool use."}
    assert not fake.script.requests


async def test_disable_parallel_tool_use_keeps_the_first_call(stack):
    client, fake = stack
    fake.script.reply = CALL + "\n" + CALL.replace("Paris", "Rome")
    body = {**BASE, "max_tokens": 200, "tools": TOOLS}
    two, streamed = await both(client, body)
    assert [block["input"] for block in two["content"]] == [{"city": "Paris"}, {"city": "Rome"}]
    assert two["stop_reason"] == "tool_use" and without_ids(streamed) == without_ids(two)
    assert streamed["content"][0]["id"] != streamed["content"][1]["id"]
    choice = {"type": "auto", "disable_parallel_tool_use": True}
    one = await (await client.post("/v1/messages", json={**body, "tool_choice": choice})).json()
    assert [block["input"] for block in one["content"]] == [{"city": "Paris"}] and one["stop_reason"] == "tool_use"
