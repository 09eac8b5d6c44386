"""The routes that render a chat body as /v1/chat/completions renders it (/tokenize, /v1/tokenize, llama.cpp's
/apply-template, /v1/score) read and refuse its messages as that route does (fake scheduler): a count or a prompt is
never answered for a body the chat refuses, and a body the chat takes is never refused.

Before, a user or system message without content was the chat's 400 (`messages[0].content is required for role
'user'`, as OpenAI answers it) but rendered as an empty turn by the other three; a content part that is not text, or
a text part without its string, got their template's `chat template error: Only text content parts are supported.`
instead of the chat's error naming the part; and /v1/score refused what the chat reads (a role in capitals, a content
list of plain strings, a tool without `type`) and took a tool whose parameters are no JSON Schema.
llama.cpp's own parser refuses such a message too (common/chat.cpp `common_chat_msgs_parse_oaicompat`: "Expected
'content'", "Unsupported content part type").
"""
import pytest

USER = {"role": "user", "content": "hi"}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
# Each route with the fields it needs beside the messages.
RENDERERS = {"/v1/tokenize": {}, "/tokenize": {}, "/apply-template": {}, "/v1/score": {"completion": "yes"}}

REFUSED = {
    "user-without-content": ({"messages": [{"role": "user"}]}, "messages[0].content",
                             "messages[0].content is required for role 'user'"),
    "user-null-content": ({"messages": [{"role": "user", "content": None}]}, "messages[0].content",
                          "messages[0].content is required for role 'user'"),
    "system-null-content": ({"messages": [{"role": "system", "content": None}, USER]}, "messages[0].content",
                            "messages[0].content is required for role 'system'"),
    "text-part-without-text": ({"messages": [{"role": "user", "content": [{"type": "text"}]}]},
                               "messages[0].content[0].text", "messages[0].content[0]: a text part needs a string"),
    "thinking-part-in-user-turn": ({"messages": [{"role": "user", "content": [{"type": "thinking", "thinking": "x"}]}]},
                                   "messages[0].content[0].type", "thinking content parts are only valid in assistant"),
    "tool-parameters-no-schema": ({"messages": [USER], "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "nope"}}}]},
        "tools[0].function.parameters", "Invalid schema for function 'f'"),
}
TAKEN = {
    "role-in-capitals": {"messages": [{"role": "USER", "content": "hi"}]},
    "plain-string-parts": {"messages": [{"role": "user", "content": ["hi"]}]},
    "tool-without-type": {"messages": [USER], "tools": [{"function": TOOL["function"]}]},
    "tool-result-without-content": {"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1"}], "tools": [TOOL]},
}


async def _post(client, path: str, body: dict):
    response = await client.post(path, json={**body, **RENDERERS.get(path, {"max_tokens": 1})})
    return response.status, await response.json()


@pytest.mark.parametrize("case", list(REFUSED))
@pytest.mark.parametrize("path", ["/v1/chat/completions", *RENDERERS])
async def test_a_body_the_chat_refuses_is_refused_by_every_renderer(stack, path, case):
    client, fake = stack
    body, param, words = REFUSED[case]
    status, out = await _post(client, path, body)
    assert status == 400, out
    assert out["error"]["param"] == param and words in out["error"]["message"], out
    assert fake.script.requests == []


@pytest.mark.parametrize("case", list(TAKEN))
async def test_a_body_the_chat_takes_renders_alike_on_every_renderer(stack, case):
    client, fake = stack
    status, chat = await _post(client, "/v1/chat/completions", TAKEN[case])
    assert status == 200, chat
    chat_ids = list(fake.script.requests[-1].prompt_token_ids)
    status, tokens = await _post(client, "/v1/tokenize", TAKEN[case])
    assert status == 200 and tokens["tokens"] == chat_ids, tokens
    status, template = await _post(client, "/apply-template", TAKEN[case])
    assert status == 200 and fake.tokenizer.encode(template["prompt"]).ids == chat_ids, template
    status, score = await _post(client, "/v1/score", TAKEN[case])
    assert status == 200 and score["object"] == "score", score
    assert fake.script.requests[-1].prompt_token_ids[:len(chat_ids)] == chat_ids
