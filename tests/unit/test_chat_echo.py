"""vLLM's echo on chat completions (fake scheduler): the answer's content starts with the final assistant message's
text, whole and streamed, on /v1 and /api/v0; after a user message it adds nothing. It was a 400."""
import orjson
import pytest

from tests.unit.test_gateway_app import events

REPLY = " the doctor away."
PREFILL = "An apple a day keeps"
CONTINUED = {"model": "default", "max_tokens": 16, "echo": True, "continue_final_message": True,
             "add_generation_prompt": False, "enable_thinking": False,
             "messages": [{"role": "user", "content": "a saying?"}, {"role": "assistant", "content": PREFILL}]}


async def content_of(client, path: str, body: dict) -> str:
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    if not body.get("stream"):
        return orjson.loads(await response.read())["choices"][0]["message"]["content"]
    chunks = [e for e in events(await response.read()) if e != "[DONE]" and e["choices"]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions"])
async def test_echo_returns_the_continued_message_whole(stack, path, stream):
    client, fake = stack
    assert await content_of(client, path, {**CONTINUED, "stream": stream}) == PREFILL + REPLY
    assert await content_of(client, path, {**CONTINUED, "stream": stream, "echo": False}) == REPLY


async def test_echo_of_text_parts_is_the_text_the_prompt_continues(stack):
    client, fake = stack
    parts = [{"type": "text", "text": "An apple "}, {"type": "text", "text": "a day keeps"}]
    body = {**CONTINUED, "messages": [CONTINUED["messages"][0], {"role": "assistant", "content": parts}]}
    assert await content_of(client, "/v1/chat/completions", body) == PREFILL + REPLY


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_echo_after_a_user_message_adds_nothing(stack, stream):
    client, fake = stack
    body = {"model": "default", "max_tokens": 16, "echo": True, "enable_thinking": False, "stream": stream,
            "messages": [{"role": "user", "content": "a saying?"}]}
    assert await content_of(client, "/v1/chat/completions", body) == REPLY
