"""How many prompts one /v1/completions request takes (fake scheduler): lm-eval's local-completions sends batch_size
prompts a request (loglikelihood: echo + logprobs), and vLLM sets no limit; 64 was the most here, so a batch_size of
128 failed every request with a 400. Now 2048 prompts (and choices: n times them), the 2049th a 400 naming `prompt`."""
import orjson
import pytest



@pytest.mark.parametrize("prompt", [[f"question {i}" for i in range(2048)], [[5, 6 + i % 50] for i in range(300)]],
                         ids=["2048-strings", "300-token-id-lists"])
async def test_a_large_batch_gets_one_choice_a_prompt(stack, prompt):
    client, fake = stack
    response = await client.post("/v1/completions", data=orjson.dumps({"prompt": prompt, "max_tokens": 1,
                                                                         "echo": True}))
    body = orjson.loads(await response.read())
    assert response.status == 200, body
    assert [choice["index"] for choice in body["choices"]] == list(range(len(prompt)))
    if isinstance(prompt[0], str):  # echo: each choice starts with its own prompt
        assert all(choice["text"] == f"question {i}Hello" for i, choice in enumerate(body["choices"]))
    assert len(fake.script.requests) == len(prompt)


async def test_the_2049th_prompt_is_a_400_naming_prompt(stack):
    client, fake = stack
    response = await client.post("/v1/completions", data=orjson.dumps({"prompt": ["a"] * 2049}))
    assert response.status == 400 and orjson.loads(await response.read()) == {"error": {
        "message": "'prompt' holds 2049 prompts; at most 2048 are accepted", "type": "invalid_request_error",
        "param": "prompt", "code": "invalid_value"}}
    assert fake.script.requests == []
