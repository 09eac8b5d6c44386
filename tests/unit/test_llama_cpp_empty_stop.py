"""llama.cpp's /completion skips an empty stop word, as llama-server reads `stop` (params_from_json_cmpl: each word
pushed `if (!word.empty())`), instead of vLLM's 400 "stop cannot contain an empty string.", which /v1 keeps (fake
scheduler)."""
import json

import pytest

REPLY = "Hello world, this is a test."


@pytest.mark.parametrize("stop, content, stop_type, settings", [
    (["", "is a"], "Hello world, this ", "word", ["is a"]),
    ([""], REPLY, "eos", []),
    ("", REPLY, "eos", []),
], ids=["beside-a-word", "alone", "empty-string"])
async def test_an_empty_stop_word_is_skipped(stack, stop, content, stop_type, settings):
    client, _ = stack
    response = await client.post("/completion", json={"prompt": "hi", "stop": stop})
    body = await response.json()
    assert response.status == 200, body
    assert (body["content"], body["stop_type"], body["generation_settings"]["stop"]) == (content, stop_type, settings)


async def test_a_stream_with_an_empty_stop_word_runs_to_the_end(stack):
    client, _ = stack
    response = await client.post("/completion", json={"prompt": "hi", "stop": ["", "is a"], "stream": True})
    assert response.status == 200, await response.text()
    events = [json.loads(line[6:]) for line in (await response.text()).splitlines() if line.startswith("data: ")]
    assert "".join(event["content"] for event in events) == "Hello world, this "
    assert (events[-1]["stop_type"], events[-1]["stopping_word"]) == ("word", "is a")


async def test_v1_keeps_vllms_400(stack):
    client, fake = stack
    response = await client.post("/v1/completions", json={"prompt": "hi", "stop": [""]})
    error = (await response.json())["error"]
    assert (response.status, error["param"], error["message"]) == (400, "stop", "stop cannot contain an empty string.")
    assert fake.script.requests == []
