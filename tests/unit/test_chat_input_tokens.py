"""POST /v1/chat/completions/input_tokens (and /chat/completions/input_tokens) over the fake scheduler (context 2048):
llama-server's count of a chat body's prompt (tools/server server.cpp routes post_chat_completions_tok to
handle_count_tokens: the body rendered as /v1/chat/completions renders it, tokenized, {"input_tokens": N, "object":
"response.input_tokens"}). Agents poll it before a turn to learn whether the conversation still fits; it was a 404
'no route' here."""
import orjson
import pytest

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
                                                                                "properties": {}}}}]
BODY = {"model": "fake-model", "messages": [{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": "Hi"}], "tools": TOOLS}


async def post(client, path: str, body) -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("path", ["/v1/chat/completions/input_tokens", "/chat/completions/input_tokens"])
async def test_count_is_the_prompt_the_chat_route_renders(stack, path):
    client, fake = stack
    status, counted = await post(client, path, {**BODY, "max_tokens": 100000, "stream": True})
    assert status == 200, counted
    status, answer = await post(client, "/v1/chat/completions", {**BODY, "max_tokens": 4})
    assert status == 200, answer
    num_prompt = len(fake.script.requests[-1].prompt_token_ids)
    assert counted == {"input_tokens": num_prompt, "object": "response.input_tokens"}
    assert answer["usage"]["prompt_tokens"] == num_prompt
    # the thinking switch changes the rendered prompt, so the count follows it
    _, off = await post(client, path, {**BODY, "chat_template_kwargs": {"enable_thinking": False}})
    await post(client, "/v1/chat/completions", {**BODY, "max_tokens": 4,
                                                "chat_template_kwargs": {"enable_thinking": False}})
    assert off["input_tokens"] == len(fake.script.requests[-1].prompt_token_ids)


async def test_a_conversation_past_the_context_is_counted(stack):
    client, _ = stack
    # "word " is one token of the fake tokenizer: 3000 of them are past the context of 2048.
    body = {**BODY, "messages": [{"role": "user", "content": "word " * 3000}]}
    status, error = await post(client, "/v1/chat/completions", body)
    assert status == 400 and error["error"]["code"] == "context_length_exceeded"
    status, counted = await post(client, "/v1/chat/completions/input_tokens", body)
    assert status == 200 and counted["input_tokens"] > 3000, counted


async def test_bad_bodies_are_the_chat_routes_errors(stack):
    client, _ = stack
    status, error = await post(client, "/v1/chat/completions/input_tokens", {**BODY, "model": "gpt-4"})
    assert status == 404 and error["error"]["code"] == "model_not_found"
    status, error = await post(client, "/v1/chat/completions/input_tokens", {"messages": "hi"})
    assert status == 400 and error["error"]["param"] == "messages"
