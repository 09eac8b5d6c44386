"""llama.cpp's t_max_predict_ms (its README: the generation's time limit, "useful for FIM applications"), as its server
applies it (tools/server/server-context.cpp process_token): once the time since the first generated token is past the
limit, the output stops after the next piece holding a newline, that newline kept, with stop_type "limit". It was
accepted and ignored: an editor plugin (llama.vim, llama.vscode send it on every request) got the whole n_predict."""
import orjson
import pytest

# Tokens come 50 ms apart (Script.delay_s): past a 1 ms limit from the second token on, so the first newline ends it.
REPLY = "Hello world\nthe quick brown fox\njumps over\nthe lazy dog"
FIRST_LINE = "Hello world\n"


@pytest.fixture
def slow(stack):
    stack[1].script.delay_s = 0.05
    return stack


async def _completion(client, body: dict) -> dict:
    response = await client.post("/completion", data=orjson.dumps({"prompt": "hi", "n_predict": 64, **body}))
    assert response.status == 200, await response.text()
    return orjson.loads(await response.read())


async def test_the_output_stops_at_the_first_newline_past_the_limit(slow):
    client, _ = slow
    body = await _completion(client, {"t_max_predict_ms": 1, "return_tokens": True})
    assert (body["content"], body["stop_type"], body["truncated"]) == (FIRST_LINE, "limit", False)
    assert body["tokens_predicted"] == len(body["tokens"]) and body["content"].count("\n") == 1


@pytest.mark.parametrize("limit", [None, 0, -1, 600_000], ids=["absent", "zero", "negative", "ten-minutes"])
async def test_no_limit_or_one_not_reached_leaves_the_output_whole(slow, limit):
    client, _ = slow
    body = await _completion(client, {} if limit is None else {"t_max_predict_ms": limit})
    assert (body["content"], body["stop_type"]) == (REPLY, "eos")


async def test_a_stream_ends_with_the_newline_and_a_limit_final(slow):
    client, _ = slow
    response = await client.post("/completion", data=orjson.dumps(
        {"prompt": "hi", "n_predict": 64, "t_max_predict_ms": 1, "stream": True}))
    events = [orjson.loads(line[6:]) for line in (await response.read()).decode().splitlines()
              if line.startswith("data: ")]
    assert "".join(event["content"] for event in events) == FIRST_LINE
    assert (events[-1]["stop"], events[-1]["stop_type"]) == (True, "limit")


@pytest.mark.parametrize("path, body", [
    ("/v1/completions", {"prompt": "hi"}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "enable_thinking": False}),
], ids=["completions", "chat"])
async def test_llama_cpps_openai_routes_take_it_too(slow, path, body):
    """llama.cpp's /v1 routes read every /completion option (params_from_json_cmpl): the choice ends "length"."""
    client, _ = slow
    response = await client.post(path, json={**body, "max_tokens": 64, "t_max_predict_ms": 1})
    answer = await response.json()
    assert response.status == 200, answer
    choice = answer["choices"][0]
    text = choice["text"] if "text" in choice else choice["message"]["content"]
    assert (text, choice["finish_reason"]) == (FIRST_LINE, "length")


async def test_a_wrong_type_is_a_400_naming_it(stack):
    client, _ = stack
    response = await client.post("/completion", data=orjson.dumps({"prompt": "hi", "t_max_predict_ms": "soon"}))
    assert response.status == 400
    assert "t_max_predict_ms" in (await response.text())


@pytest.mark.parametrize("path, body", [
    ("/completion", {"prompt": "hi"}),
    ("/v1/completions", {"prompt": "hi"}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
], ids=["completion", "v1 completions", "v1 chat"])
@pytest.mark.parametrize("value", ["9" * 400, 2**63], ids=["digits as a string", "past int64"])
async def test_a_limit_past_llama_cpps_int64_is_a_400(stack, path, body, value):
    """llama.cpp keeps t_max_predict_ms in an int64_t; "9" * 400 (a string read as its number) overflowed the ms to s
    division: a 500 OverflowError 'integer division result too large for a float'."""
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**body, "t_max_predict_ms": value}))
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "t_max_predict_ms", error
    assert "is greater than the maximum of 9223372036854775807" in error["message"]
    assert fake.script.requests == []
