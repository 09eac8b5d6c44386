"""Routes without /v1, as llama.cpp's server registers them (tools/server/server.cpp): POST /chat/completions and
/responses (with /responses/input_tokens) are the OpenAI routes, and POST /completions is llama.cpp's own /completion
(its shape, not OpenAI's: Zed's edit predictions read it so, zed-industries/zed#54804). A client whose base URL has no
/v1 got 404 'no route /chat/completions' here, where llama-server answers."""
import orjson

REPLY = "</think>\n\nHello world"


async def post(client, path, body) -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def test_chat_completions_without_v1_is_the_chat_route(stack):
    client, _ = stack
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
    status, bare = await post(client, "/chat/completions", body)
    assert status == 200, bare
    _, v1 = await post(client, "/v1/chat/completions", body)
    assert bare["object"] == "chat.completion" and bare["id"].startswith("chatcmpl-")
    assert bare["choices"][0]["message"]["content"] == v1["choices"][0]["message"]["content"] == "Hello world"


async def test_chat_completions_without_v1_streams_and_errs_as_openai(stack):
    client, _ = stack
    response = await client.post("/chat/completions", data=orjson.dumps(
        {"messages": [{"role": "user", "content": "hi"}], "stream": True}))
    text = (await response.read()).decode()
    assert response.status == 200 and '"object":"chat.completion.chunk"' in text and text.endswith("data: [DONE]\n\n")
    status, error = await post(client, "/chat/completions", {"messages": "hi"})
    assert status == 400 and error["error"]["type"] == "invalid_request_error" and error["error"]["param"] == "messages"


async def test_responses_without_v1_is_the_responses_route(stack):
    client, _ = stack
    status, body = await post(client, "/responses", {"input": "hi", "max_output_tokens": 16})
    assert status == 200, body
    assert body["object"] == "response" and body["output"][-1]["content"][0]["text"] == "Hello world"
    status, count = await post(client, "/responses/input_tokens", {"input": "hi"})
    assert status == 200 and count["input_tokens"] > 0


async def test_completions_without_v1_is_llama_cpps_completion(stack):
    client, _ = stack
    status, body = await post(client, "/completions", {"prompt": "hi", "n_predict": 2})
    assert status == 200, body
    # llama.cpp's result object (content, stop_type, tokens_predicted), not OpenAI's choices
    assert "choices" not in body and body["stop"] is True and body["tokens_predicted"] == 2
    assert body["content"] == "</think>\n\nHello"[:len(body["content"])] and body["stop_type"] == "limit"
    status, error = await post(client, "/completions", {"prompt": "hi", "n_predict": "x"})
    assert status == 400 and error["error"]["code"] == 400 and error["error"]["type"] == "invalid_request_error"
