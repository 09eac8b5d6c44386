"""llama.cpp's grammar "" is no grammar, as its server reads it (tools/server params_from_json_cmpl applies a grammar
only when the string is non-empty), on /completion, /v1 and /api/v0 (fake scheduler). SillyTavern's llama.cpp
backend sends grammar "" with every request (its textgen settings: 'grammar': settings.grammar_string, '' unless the
user wrote one): each was a 400 'grammar must be a non-empty grammar string (Lark or GBNF)', and beside a json_schema
or tools a 400 naming grammar as the second constraint. vLLM's guided_grammar "" stays the 400."""
import orjson
import pytest

REPLY = "</think>\n\n1, 2, 3, 4, 5"
USER = [{"role": "user", "content": "hi"}]
ROUTES = [("/completion", {"prompt": "hi"}),
          ("/v1/chat/completions", {"messages": USER}),
          ("/v1/completions", {"prompt": "hi"}),
          ("/api/v0/chat/completions", {"messages": USER})]
IDS = ["llama.cpp completion", "chat", "completions", "lmstudio chat"]
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


async def post(client, path: str, body: dict) -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
async def test_an_empty_grammar_is_no_grammar(stack, path, base):
    client, fake = stack
    status, body = await post(client, path, {**base, "max_tokens": 8, "grammar": "", "cache_prompt": True})
    assert status == 200, body
    assert not fake.script.requests[-1].HasField("constraint")
    text = body["content"] if path == "/completion" else body["choices"][0].get("text") or \
        body["choices"][0]["message"]["content"]
    assert "1, 2" in text


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
async def test_an_empty_grammar_beside_a_json_schema_leaves_the_schema(stack, path, base):
    client, fake = stack
    status, body = await post(client, path, {**base, "max_tokens": 8, "grammar": "", "json_schema": SCHEMA})
    assert status == 200, body
    grammar = fake.script.requests[-1].constraint.grammar
    assert '"a"' in grammar and '"integer"' in grammar


async def test_an_empty_grammar_beside_tools_leaves_the_tools(stack):
    client, fake = stack
    fake.script.reply = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n" \
                        "</tool_call>"
    status, body = await post(client, "/v1/chat/completions", {"messages": USER, "enable_thinking": False,
                                                                "tools": TOOLS, "grammar": ""})
    assert status == 200, body
    call = body["choices"][0]["message"]["tool_calls"][0]["function"]
    assert (call["name"], call["arguments"], body["choices"][0]["finish_reason"]) == \
        ("get_weather", '{"city":"Paris"}', "tool_calls")


@pytest.mark.parametrize("fields, message", [
    # llama.cpp's field: llama-server's "Failed to parse grammar: " first (5dcd16c); vLLM's keeps its own words
    ({"grammar": " "}, "Failed to parse grammar: grammar must be a non-empty grammar string (Lark or GBNF)"),
    ({"guided_grammar": " "}, "guided_grammar must be a non-empty grammar string (Lark or GBNF)"),
], ids=["blank", "vllm-guided_grammar"])
async def test_a_blank_grammar_and_a_blank_guided_grammar_stay_400s(stack, fields, message):
    client, fake = stack
    status, body = await post(client, "/v1/chat/completions", {"messages": USER, **fields})
    assert (status, body["error"]["message"]) == (400, message)
    assert fake.script.requests == []
