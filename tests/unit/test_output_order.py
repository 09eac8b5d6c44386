"""The Responses API's output items and /v1/messages' content blocks follow the order the model wrote its text and
tool calls, streamed (output_index too) and not, as OpenAI's output lists them. A reply that wrote a call and then text
listed the message item (or text block) first unstreamed while the stream listed the call first, and text between two
calls was moved after both; a Hermes JSON call's text before and after it was joined into one item before it,
streamed or not."""
import orjson
import pytest

SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}}


def call(command: str, json_form: bool = False) -> str:
    if json_form:
        return '<tool_call>\n{"name": "run", "arguments": {"command": "%s"}}\n</tool_call>' % command
    return f"<tool_call>\n<function=run>\n<parameter=command>\n{command}\n</parameter>\n</function>\n</tool_call>"


CASES = {
    "call-then-text": (call("ls") + "\nI ran ls.", ["ls", "I ran ls."]),
    "text-call-text": ("First.\n" + call("ls") + "\nThen.", ["First.", "ls", "Then."]),
    "between-calls": ("A\n" + call("ls") + "\nB\n" + call("pwd") + "\nC", ["A", "ls", "B", "pwd", "C"]),
    "json-form": ("A\n" + call("ls", json_form=True) + "\nC", ["A", "ls", "C"]),
}


def frames(raw: bytes) -> list:
    return [orjson.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]


def responses_order(output: list) -> list:
    return [orjson.loads(item["arguments"])["command"] if item["type"] == "function_call"
            else item["content"][0]["text"] for item in output]


def messages_order(blocks: list) -> list:
    return [block["input"]["command"] if block["type"] == "tool_use" else block["text"] for block in blocks]


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_responses_items_follow_the_model(stack, case):
    client, fake = stack
    fake.script.reply, expected = case
    body = {"model": "default", "input": "hi", "reasoning": {"effort": "none"},
            "tools": [{"type": "function", "name": "run", "parameters": SCHEMA}]}
    whole = orjson.loads(await (await client.post("/v1/responses", json=body)).read())
    assert responses_order(whole["output"]) == expected
    events = frames(await (await client.post("/v1/responses", json={**body, "stream": True})).read())
    done = [e for e in events if e["type"] == "response.output_item.done"]
    assert [e["output_index"] for e in done] == list(range(len(expected)))
    assert responses_order([e["item"] for e in done]) == responses_order(events[-1]["response"]["output"]) == expected


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_messages_blocks_follow_the_model(stack, case):
    client, fake = stack
    fake.script.reply, expected = case
    body = {"model": "default", "max_tokens": 500, "messages": [{"role": "user", "content": "hi"}],
            "thinking": {"type": "disabled"}, "tools": [{"name": "run", "input_schema": SCHEMA}]}
    whole = orjson.loads(await (await client.post("/v1/messages", json=body)).read())
    assert messages_order(whole["content"]) == expected
    events = frames(await (await client.post("/v1/messages", json={**body, "stream": True})).read())
    blocks: dict = {}
    for e in events:
        if e["type"] == "content_block_start":
            blocks[e["index"]] = {**e["content_block"], "partial": ""}
        elif e["type"] == "content_block_delta":
            block = blocks[e["index"]]
            block["text" if "text" in e["delta"] else "partial"] += e["delta"].get("text") or e["delta"].get(
                "partial_json", "")
    streamed = [{**b, "input": orjson.loads(b["partial"])} if b["type"] == "tool_use" else b
                for _, b in sorted(blocks.items())]
    assert messages_order(streamed) == expected
