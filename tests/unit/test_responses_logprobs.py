"""/v1/responses with include ["message.output_text.logprobs"] returns the answer's logprobs (was a 400
'not supported'): OpenAI's Response output_text part carries logprobs [{token, bytes, logprob, top_logprobs}] with
top_logprobs alternatives each, and its response.output_text.delta / .done events carry them too ({token, logprob,
top_logprobs}); vLLM builds them only when include asks (ResponsesRequest.is_include_output_logprobs), top_logprobs
alone being only echoed. Streamed and non-streamed give the same logprobs."""
import json

import pytest

BODY = {"model": "fake-model", "input": "hi", "reasoning": {"effort": "none"}}
INCLUDE = {**BODY, "include": ["message.output_text.logprobs"], "top_logprobs": 2}


def _events(raw: bytes) -> list:
    return [json.loads(line[6:]) for line in raw.decode().split("\n") if line.startswith("data: {")]


def _no_bytes(entries: list) -> list:
    return [{"token": e["token"], "logprob": e["logprob"],
             "top_logprobs": [{"token": t["token"], "logprob": t["logprob"]} for t in e["top_logprobs"]]}
            for e in entries]


async def test_include_output_logprobs_returns_them(stack):
    client, fake = stack
    fake.script.top_ids = [74, 75, 76]
    response = await client.post("/v1/responses", json=INCLUDE)
    assert response.status == 200, await response.text()
    part = (await response.json())["output"][-1]["content"][0]
    assert part["text"] == "Hello world" and "".join(e["token"] for e in part["logprobs"]) == "Hello world"
    assert all(e["logprob"] == -0.5 and len(e["top_logprobs"]) == 2 for e in part["logprobs"])
    assert all(e["bytes"] == list(e["token"].encode()) for e in part["logprobs"])
    assert fake.script.requests[-1].sampling.num_logprobs == 2
    streamed = _events(await (await client.post("/v1/responses", json={**INCLUDE, "stream": True})).read())
    deltas = [e for ev in streamed if ev["type"] == "response.output_text.delta" for e in ev["logprobs"]]
    done = next(ev for ev in streamed if ev["type"] == "response.output_text.done")
    assert deltas == done["logprobs"] == _no_bytes(part["logprobs"])
    assert streamed[-1]["response"]["output"][-1]["content"][0]["logprobs"] == part["logprobs"]


async def test_top_logprobs_alone_is_only_echoed(stack):
    client, fake = stack
    answer = await (await client.post("/v1/responses", json={**BODY, "top_logprobs": 3})).json()
    assert answer["top_logprobs"] == 3 and answer["output"][-1]["content"][0]["logprobs"] == []
    assert fake.script.requests[-1].sampling.num_logprobs == 0


@pytest.mark.parametrize("stream", [False, True])
async def test_the_reasoning_tokens_are_left_out(stack, stream):
    client, fake = stack
    fake.script.reply = "hmm\n</think>\n\nHello world"
    body = {**INCLUDE, "reasoning": {"effort": "medium"}, "stream": stream}
    raw = await (await client.post("/v1/responses", json=body)).read()
    answer = _events(raw)[-1]["response"] if stream else json.loads(raw)
    assert [item["type"] for item in answer["output"]] == ["reasoning", "message"]
    part = answer["output"][1]["content"][0]
    assert part["text"] == "Hello world", part
    assert "".join(e["token"] for e in part["logprobs"]) == "Hello world"
