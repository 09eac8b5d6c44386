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


async def _response_events(client, extra: dict) -> list:
    body = {"model": "fake-model", "input": "hi", "stream": True, **extra}
    response = await client.post("/v1/responses", json=body)
    assert response.status == 200, await response.text()
    return [json.loads(line[6:]) for line in (await response.text()).splitlines() if line.startswith("data: {")]


async def test_responses_leave_the_reasoning_out_when_asked(stack):
    # vllm-project/vllm#56428: include_reasoning false left the chat answer's thinking out but not /v1/responses'.
    # Before: its output still opened with the reasoning item (reasoning_text "Let me think."), streamed as
    # response.reasoning_text.delta events. The thinking is still generated and counted (reasoning_tokens), as on chat.
    client, _ = stack
    response = await client.post("/v1/responses", json={"model": "fake-model", "input": "hi",
                                                        "include_reasoning": False})
    assert response.status == 200, await response.text()
    answer = await response.json()
    assert [item["type"] for item in answer["output"]] == ["message"]
    assert answer["output"][0]["content"][0]["text"] == "Hello world"
    assert answer["usage"]["output_tokens_details"]["reasoning_tokens"] > 0
    events = await _response_events(client, {"include_reasoning": False})
    assert not [event["type"] for event in events if "reasoning" in event["type"]]
    assert [event["item"]["type"] for event in events if event["type"] == "response.output_item.done"] == ["message"]
    assert [item["type"] for item in events[-1]["response"]["output"]] == ["message"]


async def test_responses_keep_the_reasoning_by_default(stack):
    client, _ = stack
    for extra in ({}, {"include_reasoning": True}):
        events = await _response_events(client, extra)
        done = [event["item"] for event in events if event["type"] == "response.output_item.done"]
        assert [item["type"] for item in done] == ["reasoning", "message"]
        assert done[0]["content"][0]["text"] == "Let me think."


async def test_responses_include_reasoning_must_be_a_boolean(stack):
    client, _ = stack
    response = await client.post("/v1/responses", json={"model": "fake-model", "input": "hi",
                                                        "include_reasoning": "nope"})
    assert response.status == 400
    assert (await response.json())["error"]["param"] == "include_reasoning"
