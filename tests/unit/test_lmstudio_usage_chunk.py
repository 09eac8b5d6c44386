"""LM Studio /api/v0 streams end with the usage chunk, which has no choices, only when the client asked for it
(stream_options.include_usage), as LM Studio, OpenAI and vLLM send it. Zed's LM Studio provider (crates/
language_models provider/lmstudio.rs map_event) reads every chunk's first choice and fails a response on a chunk
without one ("Response contained no choices", zed#50569); it asks for no usage, and got that chunk on every stream."""
import orjson
import pytest

USER = [{"role": "user", "content": "Hi"}]
ROUTES = [("/api/v0/chat/completions", {"messages": USER, "enable_thinking": False}),
          ("/api/v0/completions", {"prompt": "Hi", "max_tokens": 4})]


def data_frames(raw: bytes) -> list:
    payloads = [line[len("data: "):] for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert payloads[-1] == "[DONE]"
    return [orjson.loads(payload) for payload in payloads[:-1]]


@pytest.mark.parametrize("path,body", ROUTES, ids=["chat", "completions"])
async def test_a_stream_that_asked_for_no_usage_has_a_choice_in_every_chunk(fake, path, body):
    client, servicer = fake
    servicer.script.reply = "Hello world"
    frames = data_frames(await (await client.post(path, json={"model": "fake-model", "stream": True, **body})).read())
    assert all(frame["choices"] for frame in frames)
    assert "usage" not in frames[-1] and "stats" not in frames[-1]
    assert frames[-1]["choices"][0]["finish_reason"] in ("stop", "length")


@pytest.mark.parametrize("path,body", ROUTES, ids=["chat", "completions"])
async def test_include_usage_ends_the_stream_with_usage_and_stats(fake, path, body):
    client, servicer = fake
    servicer.script.reply = "Hello world"
    request = {"model": "fake-model", "stream": True, "stream_options": {"include_usage": True}, **body}
    frames = data_frames(await (await client.post(path, json=request)).read())
    whole = await (await client.post(path, json={"model": "fake-model", **body})).json()
    assert all(frame["choices"] for frame in frames[:-1]) and frames[-1]["choices"] == []
    assert frames[-1]["usage"] == whole["usage"]
    assert frames[-1]["stats"]["stop_reason"] == whole["stats"]["stop_reason"]
