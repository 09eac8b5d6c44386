"""A call whose function name differs from an offered tool's only in case comes back under the client's spelling,
typed by that tool's schema (the released engine's fallback: 0.5.6 release notes, "Qwen3.8 emits Read for an
offered read"; ../shared/research/seed-engine.md 2.7). Without it the call named a tool the client never offered
(agents answer "unknown tool") and its values were not typed by the schema."""
import json

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.tools import offered_name, parse_tool_calls

READ = {"type": "function", "function": {"name": "read", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "string"}},
    "required": ["path"]}}}
XML = "<tool_call>\n<function=Read>\n<parameter=path>\na.txt\n</parameter>\n<parameter=offset>\n10\n</parameter>\n" \
      "</function>\n</tool_call>"
JSON_CALL = '<tool_call>\n{"name": "READ", "arguments": {"path": "a.txt", "offset": "10"}}\n</tool_call>'


def test_offered_name_prefers_exact_then_one_case_insensitive_match():
    grep = {"type": "function", "function": {"name": "Grep"}}
    shout = {"type": "function", "function": {"name": "READ"}}
    assert offered_name([READ, grep], "Read") == "read"
    assert offered_name([READ, grep], "grep") == "Grep"
    assert offered_name([READ, shout], "READ") == "READ"          # exact wins
    assert offered_name([READ, shout], "Read") == "Read"          # two candidates: left as written
    assert offered_name([READ], "Write") == "Write"


@pytest.mark.parametrize("text", [XML, JSON_CALL, XML.replace("<tool_call>\n", "").replace("\n</tool_call>", "")],
                         ids=["xml", "json", "bare"])
def test_the_call_is_named_and_typed_as_the_offered_tool(text):
    calls = parse_tool_calls(text, [READ], open_end=True)
    assert [c["function"]["name"] for c in calls] == ["read"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"path": "a.txt", "offset": "10"}


async def _post(client, path, body):
    return (await (await client.post(path, json=body)).read()).decode()


@pytest.mark.parametrize("stream", [False, True])
async def test_every_api_answers_with_the_clients_spelling(stream):
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    fake.script.reply = XML
    messages = [{"role": "user", "content": "Read a.txt"}]
    async with fake_gateway(fake) as (client, _):
        chat = await _post(client, "/v1/chat/completions", {"messages": messages, "tools": [READ], "stream": stream,
                                                            "enable_thinking": False})
        anthropic = await _post(client, "/v1/messages", {
            "model": "fake-model", "max_tokens": 512, "messages": messages, "stream": stream,
            "thinking": {"type": "disabled"},
            "tools": [{"name": "read", "input_schema": READ["function"]["parameters"]}]})
        ollama = await _post(client, "/api/chat", {"model": "fake-model", "messages": messages, "tools": [READ],
                                                   "stream": stream, "think": False})
    if stream:
        chunks = [orjson.loads(line[6:]) for line in chat.split("\n\n") if line.startswith("data: {")]
        names = [call["function"].get("name") for c in chunks if c["choices"]
                 for call in c["choices"][0]["delta"].get("tool_calls") or []]
        assert [n for n in names if n] == ["read"]
        assert '"name":"read"' in anthropic.replace(" ", "") and '"Read"' not in anthropic
        lines = [orjson.loads(line) for line in ollama.splitlines() if line.strip()]
        calls = [call for line in lines for call in line["message"].get("tool_calls") or []]
    else:
        call = orjson.loads(chat)["choices"][0]["message"]["tool_calls"][0]["function"]
        assert (call["name"], json.loads(call["arguments"])) == ("read", {"path": "a.txt", "offset": "10"})
        block = next(b for b in orjson.loads(anthropic)["content"] if b["type"] == "tool_use")
        assert (block["name"], block["input"]) == ("read", {"path": "a.txt", "offset": "10"})
        calls = orjson.loads(ollama)["message"]["tool_calls"]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == \
        [("read", {"path": "a.txt", "offset": "10"})]
