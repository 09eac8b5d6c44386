"""End to end: LM Studio /api/v0 over plain HTTP (aiohttp client) against scheduler + worker + gateway processes."""
import aiohttp
import orjson
import pytest


CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "Name three colours."}], "temperature": 0,
        "seed": 7, "max_tokens": 24, "enable_thinking": False}


@pytest.fixture
async def session(api_gateway):  # noqa: F811
    async with aiohttp.ClientSession(base_url=api_gateway) as http:
        yield http


async def sse_events(response: aiohttp.ClientResponse) -> list:
    """The JSON payload of every `data:` event, then the literal [DONE] last."""
    events = []
    async for raw in response.content:
        line = raw.decode("utf-8").strip()
        if line.startswith("data: "):
            payload = line[len("data: "):]
            events.append(payload if payload == "[DONE]" else orjson.loads(payload))
    return events


def assert_stats(stats: dict, completion_tokens: int, finish_reason: str) -> None:
    assert set(stats) == {"tokens_per_second", "time_to_first_token", "generation_time", "stop_reason"}
    assert stats["time_to_first_token"] > 0 and stats["generation_time"] > 0
    # tokens_per_second is the completion tokens over the generation time (rounded in the body).
    assert stats["tokens_per_second"] * stats["generation_time"] == pytest.approx(completion_tokens, rel=0.01)
    expected = {"stop": ("eosFound", "stopStringFound"), "length": ("maxPredictedTokensReached",
                                                                    "contextLengthReached")}[finish_reason]
    assert stats["stop_reason"] in expected


async def test_model_list_and_lookup(session):
    async with session.get("/api/v0/models") as response:
        listed = await response.json()
    assert listed["object"] == "list"
    model = listed["data"][0]
    assert model == {"id": "tiny", "object": "model", "type": "llm", "publisher": "sparkinfer", "arch": "qwen3_5",
                     "compatibility_type": "mlx", "quantization": model["quantization"], "state": "loaded",
                     "max_context_length": 8192, "loaded_context_length": 8192, "capabilities": ["tool_use"]}
    async with session.get("/api/v0/models/tiny") as response:
        assert response.status == 200 and (await response.json()) == model
    async with session.get("/api/v0/models/other-model") as response:
        assert response.status == 404
        assert (await response.json())["error"]["code"] == "model_not_found"


async def test_chat_not_streamed_has_stats_model_info_runtime(session):
    async with session.post("/api/v0/chat/completions", json=CHAT) as response:
        assert response.status == 200
        body = await response.json()
    choice = body["choices"][0]
    assert body["object"] == "chat.completion" and choice["message"]["role"] == "assistant"
    assert body["usage"]["completion_tokens"] >= 1
    assert_stats(body["stats"], body["usage"]["completion_tokens"], choice["finish_reason"])
    if choice["finish_reason"] == "length":
        assert body["usage"]["completion_tokens"] == 24 and body["stats"]["stop_reason"] == "maxPredictedTokensReached"
    assert body["model_info"] == {"arch": "qwen3_5", "quant": body["model_info"]["quant"], "format": "safetensors",
                                  "context_length": 8192}
    assert body["runtime"]["supported_formats"] == ["safetensors"] and body["runtime"]["name"].startswith("sparkinfer")


async def test_chat_streamed_equals_not_streamed_and_ends_with_stats(session):
    async with session.post("/api/v0/chat/completions", json=CHAT) as response:
        whole = await response.json()
    usage = {"stream_options": {"include_usage": True}}
    async with session.post("/api/v0/chat/completions", json={**CHAT, "stream": True, **usage}) as response:
        assert response.status == 200 and response.content_type == "text/event-stream"
        events = await sse_events(response)
    assert events[-1] == "[DONE]"
    usage_chunk = events[-2]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"] == whole["usage"]
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-2] if e["choices"])
    assert text == whole["choices"][0]["message"]["content"]
    finish = [e["choices"][0]["finish_reason"] for e in events[:-2]
              if e["choices"] and e["choices"][0]["finish_reason"]]
    assert finish == [whole["choices"][0]["finish_reason"]]
    assert_stats(usage_chunk["stats"], usage_chunk["usage"]["completion_tokens"], finish[0])


async def test_stop_string_and_unlimited_max_tokens(session):
    body = {**CHAT, "max_tokens": -1, "stop": ["e"], "temperature": 0}
    async with session.post("/api/v0/chat/completions", json=body) as response:
        assert response.status == 200
        answer = await response.json()
    if answer["choices"][0]["finish_reason"] == "stop" and answer["stats"]["stop_reason"] == "stopStringFound":
        assert "e" not in answer["choices"][0]["message"]["content"]
    assert answer["stats"]["stop_reason"] in ("stopStringFound", "eosFound", "contextLengthReached")


async def test_completions_streamed_and_not(session):
    body = {"model": "tiny", "prompt": "1, 2, 3,", "max_tokens": 12, "temperature": 0}
    async with session.post("/api/v0/completions", json=body) as response:
        whole = await response.json()
    assert whole["object"] == "text_completion" and whole["model_info"]["format"] == "safetensors"
    assert_stats(whole["stats"], whole["usage"]["completion_tokens"], whole["choices"][0]["finish_reason"])
    usage = {"stream_options": {"include_usage": True}}
    async with session.post("/api/v0/completions", json={**body, "stream": True, **usage}) as response:
        events = await sse_events(response)
    text = "".join(e["choices"][0]["text"] for e in events[:-2])
    assert text == whole["choices"][0]["text"]
    assert events[-2]["stats"]["stop_reason"] == whole["stats"]["stop_reason"]


async def test_embeddings_501_and_server_keeps_serving(session):
    async with session.post("/api/v0/embeddings", json={"model": "tiny", "input": "hi"}) as response:
        assert response.status == 501
        error = (await response.json())["error"]
    assert error["code"] == "embeddings_unsupported" and "does not support embeddings" in error["message"]
    async with session.post("/api/v0/chat/completions", json={**CHAT, "max_tokens": 2}) as response:
        assert response.status == 200 and (await response.json())["usage"]["completion_tokens"] >= 1
