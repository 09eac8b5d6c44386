"""n on /v1 (fake scheduler): up to OpenAI's 128 ("Invalid 'n': integer above maximum value. Expected a value <= 128";
vLLM sets no bound), where 9 was a 400 ('9 is greater than the maximum of 8'), so a pass@k evaluation asking for 10
or 20 samples of one prompt, as it does of vLLM's server, failed; at most 2048 choices in all per /v1/completions
request (n times its prompts, each choice one scheduler request)."""
import orjson
import pytest


USER = [{"role": "user", "content": "hi"}]
ROUTES = [("/v1/chat/completions", {"messages": USER, "enable_thinking": False}),
          ("/v1/completions", {"prompt": "hi"}),
          ("/api/v0/chat/completions", {"messages": USER, "enable_thinking": False})]
IDS = ["chat", "completions", "lmstudio"]


def text_of(choice: dict) -> str:
    return choice["text"] if "text" in choice else choice["message"]["content"]


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
@pytest.mark.parametrize("n", [9, 20, 128])
async def test_n_up_to_128_gives_n_choices(stack, path, base, n):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**base, "n": n, "max_tokens": 4, "seed": 7}))
    body = orjson.loads(await response.read())
    assert response.status == 200, body
    assert [choice["index"] for choice in body["choices"]] == list(range(n))
    assert all(text_of(choice) == "Hello world" for choice in body["choices"])
    assert body["usage"]["completion_tokens"] == n * 3   # "Hello", " world" and the eos
    # One scheduler request per choice, seeded seed + i.
    assert sorted(request.sampling.seed for request in fake.script.requests) == [7 + i for i in range(n)]


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
async def test_n_above_128_is_openais_400(stack, path, base):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**base, "n": 129}))
    assert response.status == 400 and orjson.loads(await response.read()) == {"error": {
        "message": "invalid value for 'n': 129 is greater than the maximum of 128", "type": "invalid_request_error",
        "param": "n", "code": "invalid_value"}}
    assert fake.script.requests == []


@pytest.mark.parametrize("prompt, n, total", [(["a"] * 17, 128, 2176), ([[1, 2]] * 2048, 2, 4096)],
                         ids=["strings", "token-ids"])
async def test_more_than_2048_choices_in_all_is_a_400(stack, prompt, n, total):
    client, fake = stack
    response = await client.post("/v1/completions", data=orjson.dumps({"prompt": prompt, "n": n}))
    assert response.status == 400 and orjson.loads(await response.read()) == {"error": {
        "message": f"n ({n}) times the number of prompts ({len(prompt)}) asks for {total} choices; at most 2048 are "
                   f"accepted in one request", "type": "invalid_request_error", "param": "n", "code": "invalid_value"}}
    assert fake.script.requests == []


async def test_512_choices_in_all_are_served(stack):
    client, fake = stack
    response = await client.post("/v1/completions", data=orjson.dumps({"prompt": [[1, 2]] * 4, "n": 128,
                                                                         "max_tokens": 2}))
    body = orjson.loads(await response.read())
    assert response.status == 200 and len(body["choices"]) == 512 and len(fake.script.requests) == 512
    assert body["choices"][511]["index"] == 511 and body["choices"][511]["text"] == "Hello world"
