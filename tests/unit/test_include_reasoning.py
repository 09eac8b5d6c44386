"""vLLM's include_reasoning: false (and OpenRouter's reasoning.exclude) leave the thinking out of a chat answer, streamed
or not; the answer itself is unchanged (fake scheduler)."""
import json

import pytest

REPLY = "Let me think.</think>\n\nHello world"
PATHS = ["/v1/chat/completions", "/api/v0/chat/completions"]


async def _whole(client, path: str, extra: dict) -> dict:
    body = {"messages": [{"role": "user", "content": "hi"}], **extra}
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    return (await response.json())["choices"][0]["message"]


async def _streamed(client, path: str, extra: dict) -> tuple[str, str, set]:
    """(reasoning, content, every delta key seen) of a streamed answer."""
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": True, **extra}
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    reasoning, content, keys = "", "", set()
    for line in (await response.text()).splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                keys |= set(choice["delta"])
                reasoning += choice["delta"].get("reasoning_content") or ""
                content += choice["delta"].get("content") or ""
    return reasoning, content, keys


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("extra", [{"include_reasoning": False}, {"reasoning": {"exclude": True}}],
                         ids=["include_reasoning", "reasoning.exclude"])
async def test_reasoning_left_out_when_asked(stack, path, extra):
    # Before: include_reasoning was taken as a field without effect, so the thinking came back all the same
    # (message.reasoning_content "Let me think.", and reasoning_content deltas when streamed).
    client, _ = stack
    message = await _whole(client, path, extra)
    assert message["content"] == "Hello world"
    assert message.get("reasoning_content") is None and message.get("reasoning") is None
    reasoning, content, keys = await _streamed(client, path, extra)
    assert (reasoning, content) == ("", "Hello world")
    assert not keys & {"reasoning_content", "reasoning"}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("extra", [{}, {"include_reasoning": True}, {"include_reasoning": None}],
                         ids=["absent", "true", "null"])
async def test_reasoning_returned_by_default(stack, path, extra):
    client, _ = stack
    message = await _whole(client, path, extra)
    assert (message["reasoning_content"], message["reasoning"], message["content"]) == (
        "Let me think.", "Let me think.", "Hello world")
    assert (await _streamed(client, path, extra))[:2] == ("Let me think.", "Hello world")


async def test_include_reasoning_must_be_a_boolean(stack):
    client, _ = stack
    response = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                                 "include_reasoning": "nope"})
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["param"] == "include_reasoning" and error["code"] == "invalid_type"
