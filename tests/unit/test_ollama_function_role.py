"""Ollama /api/chat: a message of OpenAI's deprecated `function` role is the function's result, a `tool` message, as
/v1 reads it (gateway.legacy_functions), instead of a 400. Clients written for that API send it to Ollama (Qwen-Agent's
function calling; ollama/ollama#6213, where Ollama answered 200 and the model never saw the result)."""
import pytest

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
ASKED = [{"role": "user", "content": "Weather in Paris?"},
         {"role": "assistant", "content": "", "tool_calls": [
             {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}]


def _body(result: dict, **extra) -> dict:
    return {"model": "fake-model", "messages": ASKED + [result], "tools": TOOLS, "think": False, "stream": False,
            **extra}


async def _rendered(client, result: dict) -> str:
    response = await client.post("/api/chat", json=_body(result, _debug_render_only=True))
    answer = await response.json()
    assert response.status == 200, answer
    return answer["_debug_info"]["rendered_template"]


@pytest.mark.parametrize("role", ["function", "Function"])
async def test_a_function_message_is_the_tool_result(fake, role):
    client, servicer = fake
    servicer.script.reply = "It is sunny."
    result = {"role": role, "name": "get_weather", "content": "33 Celsius"}
    response = await client.post("/api/chat", json=_body(result))
    answer = await response.json()
    assert response.status == 200, answer
    assert answer["message"] == {"role": "assistant", "content": "It is sunny."}
    prompt = servicer.tokenizer.decode(list(servicer.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
    assert "<tool_response>\n33 Celsius\n</tool_response>" in prompt
    # The prompt is the one the same result sent as Ollama's tool message makes.
    tool = {"role": "tool", "tool_name": "get_weather", "content": "33 Celsius"}
    assert await _rendered(client, result) == await _rendered(client, tool)


async def test_a_role_no_api_has_is_still_refused(fake):
    client, _ = fake
    response = await client.post("/api/chat", json=_body({"role": "robot", "content": "33 Celsius"}))
    assert response.status == 400
    # the roles read here, function and Continue's thinking among them (the 400 listed five before they were read)
    assert (await response.json())["error"] == (
        "messages[2].role must be one of system, developer, user, assistant, tool, function, thinking")
