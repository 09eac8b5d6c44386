"""A JSON (Hermes / Llama style) tool call's arguments: an object, or the JSON text of one; anything else stays text."""
import ollama
import pytest

from gateway.tools import parse_tool_calls

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
HI = [{"role": "user", "content": "Weather?"}]


def call(body: str) -> str:
    return "<tool_call>\n" + body + "\n</tool_call>"


@pytest.mark.parametrize("body", ['{"name": "get_weather", "arguments": [1, 2]}',
                                  '{"name": "get_weather", "arguments": "Paris"}',
                                  '{"name": "get_weather", "arguments": "[\\"Paris\\"]"}',
                                  '{"name": "get_weather", "arguments": 5}'],
                         ids=["list", "bare-string", "string-of-a-list", "number"])
async def test_arguments_that_are_no_object_leave_the_block_text(stack, body):
    """Ollama's answer carries arguments as an object (ollama-python validates a Mapping): [1, 2] came back as
    "arguments": [1, 2] (ollama-python raised a ValidationError for the whole answer) and "Paris" as {} (the value
    lost); on /v1 as the arguments "[1,2]" and "Paris" (not JSON). Ollama's JSON call parser finds no call then, and
    vLLM's qwen3_coder parser reads no JSON call at all: the block is the answer's text."""
    client, servicer = stack
    servicer.script.reply = call(body)
    chat = {"model": "fake-model", "messages": HI, "tools": TOOLS, "think": False, "stream": False}
    response = await client.post("/api/chat", json=chat)
    raw = await response.read()
    answer = ollama.ChatResponse.model_validate_json(raw)
    assert answer.message.tool_calls is None and answer.message.content == call(body)
    v1 = {"model": "fake-model", "messages": HI, "tools": TOOLS, "chat_template_kwargs": {"enable_thinking": False}}
    choice = (await (await client.post("/v1/chat/completions", json=v1)).json())["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["content"] == call(body)
    assert not choice["message"].get("tool_calls")


@pytest.mark.parametrize("body,arguments", [
    ('{"name": "get_weather", "arguments": {"city": "Paris"}}', {"city": "Paris"}),
    ('{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}', {"city": "Paris"}),
    ('{"name": "get_weather", "parameters": {"city": "Rome"}}', {"city": "Rome"}),
    ('{"name": "get_weather"}', {}), ('{"name": "get_weather", "arguments": null}', {})],
    ids=["object", "json-text-of-an-object", "llama-parameters", "absent", "null"])
async def test_object_arguments_are_a_call(stack, body, arguments):
    """An object, the JSON text of one, or Llama's "parameters" ({"city": "Rome"} was lost: arguments {})."""
    client, servicer = stack
    servicer.script.reply = call(body)
    chat = {"model": "fake-model", "messages": HI, "tools": TOOLS, "think": False, "stream": False}
    answer = ollama.ChatResponse.model_validate_json(await (await client.post("/api/chat", json=chat)).read())
    assert answer.message.content == "" and len(answer.message.tool_calls) == 1
    assert answer.message.tool_calls[0].function.name == "get_weather"
    assert dict(answer.message.tool_calls[0].function.arguments) == arguments


def test_parse_writes_an_object_text_as_the_object():
    """As an object's arguments are written (compact), so that the stream, which reads the text as it comes
    (tool_preview_json), and the whole answer give the same arguments text."""
    calls = parse_tool_calls(call('{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}'), TOOLS)
    assert calls[0]["function"]["arguments"] == '{"city":"Paris"}'
