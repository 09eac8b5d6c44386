"""POST /invocations, SageMaker's inference route, as vLLM routes it (vllm#11557; its api_server tries
ChatCompletionRequest, then CompletionRequest): a body with `messages` is a chat completion, one with `prompt` a
completion, streamed or not, with those routes' own errors; anything else is vLLM's 400 "Cannot find suitable handler
for request.". GET /ping (SageMaker's health route) was served here already, but /invocations was a 404, so a
SageMaker endpoint of this server answered no request."""
import orjson
import pytest

REPLY = "Hello world"
CHAT = {"messages": [{"role": "user", "content": "Hi"}], "enable_thinking": False, "max_tokens": 20}


async def _post(client, body) -> tuple:
    response = await client.post("/invocations", data=orjson.dumps(body),
                                  headers={"Content-Type": "application/json"})
    return response.status, await response.read()


async def test_a_body_with_messages_is_a_chat_completion(stack):
    client, _ = stack
    status, raw = await _post(client, CHAT)
    answer = orjson.loads(raw)
    assert (status, answer["object"]) == (200, "chat.completion")
    choice = answer["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == ("Hello world", "stop")


async def test_a_body_with_prompt_is_a_completion(stack):
    client, _ = stack
    status, raw = await _post(client, {"prompt": "Hi", "max_tokens": 5})
    answer = orjson.loads(raw)
    assert (status, answer["object"], answer["choices"][0]["text"]) == (200, "text_completion", "Hello world")


async def test_a_streamed_chat_streams(stack):
    client, _ = stack
    status, raw = await _post(client, {**CHAT, "stream": True})
    events = [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]
    chunks = [orjson.loads(event) for event in events[:-1]]
    assert (status, events[-1]) == (200, "[DONE]")
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "Hello world"


async def test_the_routes_own_errors_come_back(stack):
    client, _ = stack
    status, raw = await _post(client, {**CHAT, "temperature": 5})
    assert (status, orjson.loads(raw)["error"]["param"]) == (400, "temperature")


@pytest.mark.parametrize("body", [{"input": "Hi"}, {"model": "fake-model"}, ["Hi"]], ids=["input", "no-prompt", "list"])
async def test_any_other_body_is_vllms_400(stack, body):
    client, _ = stack
    status, raw = await _post(client, body)
    error = orjson.loads(raw)["error"]
    assert (status, error["type"]) == (400, "invalid_request_error")
    assert error["message"].startswith("Cannot find suitable handler for request. Expected one of: "
                                       "['ChatCompletionRequest', 'CompletionRequest']")


@pytest.mark.parametrize("body", [CHAT, {"prompt": "Hi", "max_tokens": 5}], ids=["chat", "completion"])
async def test_the_body_is_parsed_once(stack, monkeypatch, body):
    """/invocations read the JSON to choose its handler, which read it again: a 24 MB body parsed (and its depth
    walked) twice."""
    from gateway import web
    parsed = []
    parse = web._parse
    monkeypatch.setattr(web, "_parse", lambda raw: parsed.append(len(raw)) or parse(raw))
    client, _ = stack
    status, raw = await _post(client, body)
    answer = orjson.loads(raw)
    assert status == 200 and answer["object"] in ("chat.completion", "text_completion"), answer
    assert "Hello world" in raw.decode()
    assert parsed == [len(orjson.dumps(body))]
