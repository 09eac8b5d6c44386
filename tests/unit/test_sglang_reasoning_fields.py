"""SGLang's reasoning request fields on chat (python/sglang/srt/entrypoints/openai/protocol.py ChatCompletionRequest):
separate_reasoning: false leaves the generated text unsplit in content (serving_chat runs no reasoning parser), and
stream_reasoning: false sends a stream's reasoning in one delta once it ends (its ReasoningParser buffers it). Both
were logged as unknown fields and ignored: the thinking always came apart, piece by piece."""
import json

import pytest

REPLY = "Let me think.\n</think>\n\nHello world"
PATHS = ["/v1/chat/completions", "/api/v0/chat/completions"]
USER = [{"role": "user", "content": "hi"}]


async def _deltas(client, path: str, extra: dict) -> list:
    response = await client.post(path, json={"messages": USER, "stream": True, **extra})
    assert response.status == 200, await response.text()
    return [choice["delta"] for line in (await response.text()).splitlines() if line.startswith("data: {")
            for choice in json.loads(line[6:])["choices"]]


@pytest.mark.parametrize("path", PATHS)
async def test_separate_reasoning_false_leaves_the_text_as_generated(stack, path):
    client, _ = stack
    response = await client.post(path, json={"messages": USER, "separate_reasoning": False})
    message = (await response.json())["choices"][0]["message"]
    assert message["content"] == REPLY
    assert "reasoning_content" not in message and "reasoning" not in message
    deltas = await _deltas(client, path, {"separate_reasoning": False})
    assert "".join(d.get("content") or "" for d in deltas) == REPLY
    assert not any(d.get("reasoning_content") or d.get("reasoning") for d in deltas)


@pytest.mark.parametrize("path", PATHS)
async def test_stream_reasoning_false_sends_the_reasoning_in_one_delta(stack, path):
    client, _ = stack
    deltas = [d for d in await _deltas(client, path, {"stream_reasoning": False}) if d]
    thoughts = [d for d in deltas if d.get("reasoning_content")]
    assert thoughts == [{"reasoning_content": "Let me think.\n", "reasoning": "Let me think.\n"}]
    # Before the answer, in a chunk of its own.
    assert deltas.index(thoughts[0]) == 1 and deltas[2] == {"content": "Hello"}
    assert "".join(d.get("content") or "" for d in deltas) == "Hello world"
    # The whole answer is as without the field.
    response = await client.post(path, json={"messages": USER, "stream_reasoning": False})
    message = (await response.json())["choices"][0]["message"]
    assert (message["reasoning_content"], message["content"]) == ("Let me think.\n", "Hello world")


async def test_held_reasoning_cut_by_max_tokens_comes_at_the_finish(stack):
    client, _ = stack
    deltas = await _deltas(client, "/v1/chat/completions", {"stream_reasoning": False, "max_tokens": 4})
    thoughts = [d["reasoning_content"] for d in deltas if d.get("reasoning_content")]
    assert thoughts == ["Let m"]   # the fake tokenizer: "L", "et", " ", "m"
    assert not any(d.get("content") for d in deltas)


@pytest.mark.parametrize("field", ["separate_reasoning", "stream_reasoning"])
async def test_a_field_that_is_no_boolean_is_a_400(stack, field):
    client, _ = stack
    response = await client.post("/v1/chat/completions", json={"messages": USER, field: "nope"})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == field and "boolean" in error["message"]
