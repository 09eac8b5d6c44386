"""llama-server's `timings` on its OpenAI-compatible routes (tools/server/server-task.cpp: to_json_oaicompat_chat and
to_json_oaicompat push `timings` beside `usage`; to_json_oaicompat_chat_stream pushes it on the stream's last chunk,
the usage chunk when stream_options.include_usage asks for one, else the finish chunk). Clients read tokens per second
from it: AnythingLLM's Generic OpenAI provider (its PR #4981: the final chunk's predicted_n / predicted_ms) and
llama-swap. It was only on /completion: /v1 answers had none, and those clients fell back to wall-clock rates."""
import orjson
import pytest

CHAT = {"messages": [{"role": "user", "content": "hi"}], "enable_thinking": False}
COMPLETION = {"prompt": "hi"}
ROUTES = [("/v1/chat/completions", CHAT), ("/chat/completions", CHAT), ("/v1/completions", COMPLETION)]
IDS = ["chat", "chat-unprefixed", "completions"]
KEYS = {"cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n", "predicted_ms",
        "predicted_per_token_ms", "predicted_per_second"}


@pytest.fixture
def slow(stack):
    stack[1].script.delay_s = 0.01   # tokens 10 ms apart: a generation time to measure
    return stack


def _check(timings: dict, usage: dict) -> None:
    assert set(timings) == KEYS
    assert timings["predicted_n"] == usage["completion_tokens"] > 0
    assert timings["prompt_n"] + timings["cache_n"] == usage["prompt_tokens"]
    assert timings["predicted_ms"] > 0 and timings["predicted_per_second"] > 0


async def _events(client, path: str, body: dict) -> list:
    response = await client.post(path, data=orjson.dumps({**body, "stream": True}))
    assert response.status == 200, await response.text()
    lines = (await response.read()).decode().splitlines()
    assert lines[-2:] == ["data: [DONE]", ""] or lines[-1] == "data: [DONE]"
    return [orjson.loads(line[6:]) for line in lines if line.startswith("data: {")]


@pytest.mark.parametrize("path, body", ROUTES, ids=IDS)
async def test_a_whole_answer_has_timings_beside_usage(slow, path, body):
    client, _ = slow
    response = await client.post(path, data=orjson.dumps({**body, "max_tokens": 8}))
    answer = await response.json()
    assert response.status == 200, answer
    _check(answer["timings"], answer["usage"])


@pytest.mark.parametrize("path, body", ROUTES, ids=IDS)
async def test_a_streams_finish_chunk_carries_them_without_a_usage_chunk(slow, path, body):
    client, _ = slow
    events = await _events(client, path, {**body, "max_tokens": 8})
    assert [("timings" in event) for event in events] == [False] * (len(events) - 1) + [True]
    assert events[-1]["choices"][0]["finish_reason"] is not None
    generated = events[-1]["timings"]["predicted_n"]
    _check(events[-1]["timings"], {"completion_tokens": generated, "prompt_tokens": events[-1]["timings"]["prompt_n"]})


@pytest.mark.parametrize("path, body", ROUTES, ids=IDS)
async def test_with_include_usage_the_usage_chunk_carries_them(slow, path, body):
    client, _ = slow
    events = await _events(client, path, {**body, "max_tokens": 8, "stream_options": {"include_usage": True}})
    assert [("timings" in event) for event in events] == [False] * (len(events) - 1) + [True]
    assert events[-1]["choices"] == []
    _check(events[-1]["timings"], events[-1]["usage"])


@pytest.mark.parametrize("path, body", ROUTES, ids=IDS)
async def test_several_choices_have_none(slow, path, body):
    """llama.cpp runs each choice as a task of its own; one timings object would describe only one of them."""
    client, _ = slow
    response = await client.post(path, data=orjson.dumps({**body, "max_tokens": 4, "n": 2}))
    answer = await response.json()
    assert response.status == 200, answer
    assert "timings" not in answer and len(answer["choices"]) == 2


async def test_lm_studios_routes_keep_their_stats_alone(slow):
    """LM Studio's /api/v0 answers carry its own stats, never llama.cpp's timings."""
    client, _ = slow
    response = await client.post("/api/v0/chat/completions", data=orjson.dumps({**CHAT, "max_tokens": 4}))
    answer = await response.json()
    assert response.status == 200, answer
    assert "timings" not in answer and answer["stats"]["tokens_per_second"] >= 0


@pytest.mark.parametrize("path, body", ROUTES, ids=IDS)
async def test_timings_per_token_puts_the_timings_so_far_on_every_chunk_of_text(slow, path, body):
    """timings_per_token (llama.cpp's web UI, wllama and others send it to show a live rate): each partial's last
    delta carries the timings so far (server-task.cpp to_json_oaicompat_chat partial: timings.prompt_n >= 0)."""
    client, _ = slow
    events = await _events(client, path, {**body, "max_tokens": 8, "timings_per_token": True})
    texts = [e for e in events if e["choices"][0].get("text") or (e["choices"][0].get("delta") or {}).get("content")]
    assert len(texts) > 1 and all("timings" in e for e in texts)
    counts = [e["timings"]["predicted_n"] for e in texts]
    assert counts == sorted(counts) and counts[0] >= 1
    role = [e for e in events if "role" in (e["choices"][0].get("delta") or {})]
    assert all("timings" not in e for e in role) and "timings" in events[-1]


async def test_return_progress_puts_prompt_progress_on_the_role_chunk(slow):
    """return_progress (llama.cpp's web UI sends it beside timings_per_token): the role chunk carries prompt_progress
    (server-task.cpp to_json_oaicompat_chat partial with is_progress: a role delta and result_prompt_progress), here
    once the prompt is read, so processed is the whole prompt."""
    client, _ = slow
    events = await _events(client, "/v1/chat/completions", {**CHAT, "max_tokens": 4, "return_progress": True,
                                                             "stream_options": {"include_usage": True}})
    progress = [e for e in events if "prompt_progress" in e]
    assert len(progress) == 1 and progress[0]["choices"][0]["delta"]["role"] == "assistant"
    sent = progress[0]["prompt_progress"]
    assert set(sent) == {"total", "cache", "processed", "time_ms"} and sent["time_ms"] >= 0
    assert sent["total"] == sent["processed"] == events[-1]["usage"]["prompt_tokens"] > 0


async def test_return_progress_on_completions_is_a_chunk_per_prompt_before_its_text(slow):
    """llama-server's completions partial with is_progress (to_json_oaicompat: prompt_progress beside an empty text)."""
    client, _ = slow
    events = await _events(client, "/v1/completions", {"prompt": ["hi", "hello there"], "max_tokens": 2,
                                                       "return_progress": True})
    progress = [e for e in events if "prompt_progress" in e]
    assert [e["choices"][0]["index"] for e in progress] == [0, 1]
    assert all(e["choices"][0]["text"] == "" for e in progress) and events[:2] == progress
    assert progress[0]["prompt_progress"]["total"] < progress[1]["prompt_progress"]["total"]
