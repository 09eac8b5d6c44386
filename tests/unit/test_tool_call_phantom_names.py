"""A <function=NAME> whose NAME holds template or markup characters ({{ tc.name }}, quotes, '<') is the model writing
about the format, not calling: it stays text, as vLLM's qwen3_coder refuses such a name (_is_valid_function_name:
"Reject phantom tool calls produced when the model writes an unrendered Jinja template or pseudo-XML ... makes agents
loop"). It came back as a call named "{{ tc.name }}" with finish_reason tool_calls, on every route, streamed or not,
and a call the model made after it was lost with it when the whole reading failed."""
import orjson
import pytest

TOOLS = [{"type": "function", "function": {"name": "run", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}}}}]
PHANTOM = "<tool_call>\n<function={{ tc.name }}>\n<parameter={{ k }}>\n{{ v }}\n</parameter>\n</function>\n</tool_call>"
QUOTED = "<tool_call>\n<function=\"run\">\n</function>\n</tool_call>"
REAL = "<tool_call>\n<function=run>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>"
CASES = {
    "template": ("The format is:\n" + PHANTOM, "The format is:\n" + PHANTOM, []),
    "quoted": ("Write " + QUOTED + " like that.", "Write " + QUOTED + " like that.", []),
    "then-a-call": ("The format is:\n" + PHANTOM + "\nNow:\n" + REAL, "The format is:\n" + PHANTOM + "\nNow:",
                    [{"command": "ls"}]),
}


def frames(raw: bytes) -> list:
    return [orjson.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_a_phantom_name_is_no_call(stack, case, stream):
    client, fake = stack
    fake.script.reply, content, calls = case
    body = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS,
            "enable_thinking": False, "stream": stream}
    raw = await (await client.post("/v1/chat/completions", json=body)).read()
    if stream:
        choices = [choice for chunk in frames(raw) for choice in chunk["choices"]]
        text = "".join(choice["delta"].get("content") or "" for choice in choices)
        pieces: dict = {}
        for call in [call for choice in choices for call in choice["delta"].get("tool_calls") or []]:
            pieces[call["index"]] = pieces.get(call["index"], "") + call["function"]["arguments"]
        arguments, finish = list(pieces.values()), [c["finish_reason"] for c in choices if c["finish_reason"]]
    else:
        choice = orjson.loads(raw)["choices"][0]
        text, finish = choice["message"]["content"], [choice["finish_reason"]]
        arguments = [call["function"]["arguments"] for call in choice["message"].get("tool_calls") or []]
    assert (text, [orjson.loads(a) for a in arguments]) == (content, calls)
    assert finish == ["tool_calls" if calls else "stop"]
    ollama = orjson.loads(await (await client.post("/api/chat", json={**body, "think": False, "stream": False})).read())
    assert ollama["message"]["content"] == content
    assert [call["function"]["arguments"] for call in ollama["message"].get("tool_calls") or []] == calls


async def test_inside_unclosed_reasoning_it_stays_reasoning(stack):
    client, fake = stack
    fake.script.reply = "The format is:\n" + PHANTOM + "\nso I answer"
    body = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}
    message = orjson.loads(await (await client.post("/v1/chat/completions", json=body)).read())["choices"][0]["message"]
    assert message["reasoning_content"] == fake.script.reply and message["content"] == ""
