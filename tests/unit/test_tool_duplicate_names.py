"""A tool name offered twice (two MCP servers that both have create_pull_request, a client that lists a tool twice)
is served, as OpenAI, vLLM and Ollama serve it: the template lists both definitions, and a call is read and forced by
the first one's schema. It was a 400 "tools[1].function.name 'f' is offered twice" on /v1, /api/v0, /api/chat and
/v1/responses. Anthropic's /v1/messages keeps Anthropic's own 400 "tools: Tool names must be unique.\""""
import os

import orjson
import pytest
from tokenizers import Tokenizer

TINY = os.path.join(os.path.dirname(__file__), "..", "..", "models", "tiny", "tokenizer.json")
FIRST = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
SECOND = {"type": "object", "properties": {"n": {"type": "string"}, "extra": {"type": "string"}}}
TOOLS = [{"type": "function", "function": {"name": "create_pr", "description": "one", "parameters": FIRST}},
         {"type": "function", "function": {"name": "create_pr", "description": "two", "parameters": SECOND}}]
CALL = "<tool_call>\n<function=create_pr>\n<parameter=n>\n{n}\n</parameter>\n</function>\n</tool_call>"
USER = [{"role": "user", "content": "Open it."}]


async def _post(client, path: str, body: dict):
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions"])
async def test_openai_routes_serve_it_and_read_the_call_by_the_first_schema(stack, path):
    client, fake = stack
    fake.script.reply = CALL.format(n=7)
    status, out = await _post(client, path, {"model": "default", "messages": USER, "tools": TOOLS,
                                             "enable_thinking": False})
    assert status == 200, out
    call = out["choices"][0]["message"]["tool_calls"][0]["function"]
    assert (call["name"], call["arguments"]) == ("create_pr", '{"n":7}')
    prompt = fake.tokenizer.decode(fake.script.requests[-1].prompt_token_ids, skip_special_tokens=False)
    assert '"description": "one"' in prompt and '"description": "two"' in prompt


async def test_ollama_and_responses_serve_it(stack):
    client, fake = stack
    fake.script.reply = CALL.format(n=7)
    status, out = await _post(client, "/api/chat", {"model": "default", "messages": USER, "tools": TOOLS,
                                                    "stream": False, "think": False})
    assert status == 200, out
    assert [c["function"]["arguments"] for c in out["message"]["tool_calls"]] == [{"n": 7}]
    tools = [{"type": "function", "name": "create_pr", "parameters": FIRST}, {"type": "web_search"},
             {"type": "function", "name": "create_pr", "parameters": SECOND}]
    status, out = await _post(client, "/v1/responses", {"input": "Open it.", "tools": tools,
                                                        "reasoning": {"effort": "none"}})
    assert status == 200, out
    assert [(item["name"], item["arguments"]) for item in out["output"]] == [("create_pr", '{"n":7}')]


async def test_the_deprecated_functions_serve_it(stack):
    client, fake = stack
    fake.script.reply = CALL.format(n=7)
    functions = [tool["function"] for tool in TOOLS]
    status, out = await _post(client, "/v1/chat/completions", {"messages": USER, "functions": functions,
                                                               "enable_thinking": False})
    assert status == 200, out
    assert out["choices"][0]["message"]["function_call"] == {"name": "create_pr", "arguments": '{"n":7}'}


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "create_pr"}}],
                         ids=["required", "named"])
async def test_a_forced_call_follows_the_first_definition(grammar_stack, tool_choice):
    client, fake, book = grammar_stack
    status, out = await _post(client, "/v1/chat/completions", {"messages": USER, "tools": TOOLS, "max_tokens": 64,
                                                               "tool_choice": tool_choice})
    assert status == 200, out

    def accepts(text: str) -> bool:
        grammar = book.start(fake.script.requests[-1].constraint, [])
        ids = Tokenizer.from_file(TINY).encode(text, add_special_tokens=False).ids + [fake.eos_id]
        return all(grammar.matcher.consume_token(i) for i in ids)
    assert accepts(CALL.format(n=7)) and not accepts(CALL.format(n='"seven"'))


async def test_anthropic_keeps_its_400(stack):
    client, fake = stack
    tools = [{"name": "create_pr", "input_schema": FIRST}, {"name": "create_pr", "input_schema": SECOND}]
    status, out = await _post(client, "/v1/messages", {"model": "default", "max_tokens": 16, "messages": USER,
                                                       "tools": tools})
    assert status == 400
    assert out["error"] == {"type": "invalid_request_error", "message": "tools: Tool names must be unique."}
    assert fake.script.requests == []
