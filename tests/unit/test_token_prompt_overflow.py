"""A /v1/completions prompt of token ids that fills the context is refused in the same vLLM words as a text prompt of
that many tokens (fake scheduler, context 2048). vLLM checks both after tokenizing with one sentence
(TokenizeParams._apply_length_check / serving_engine._validate_input: "This model's maximum context length is C
tokens. However, your request has N input tokens. Please reduce the length of the input messages."), which clients
parse for the count (hermes-agent's "your request has (\\d+) input tokens"). The id list's length check (made before
schema validation, so a 3-million-id prompt is refused at once) said "your prompt contains N tokens, which leaves no
room for a completion" instead."""
import orjson
import pytest

CTX = 2048


def vllm_words(num_prompt: int) -> str:
    return (f"This model's maximum context length is {CTX} tokens. However, your request has {num_prompt} input "
            f"tokens. Please reduce the length of the input messages.")


async def post(client, path, body) -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("prompt,num_prompt", [
    ([5] * CTX, CTX),
    ([5] * (CTX + 1), CTX + 1),
    ([[5, 6], [5] * (CTX + 7)], CTX + 7),
], ids=["exactly-the-context", "one-past", "second-of-a-batch"])
async def test_token_ids_filling_the_context_are_refused_in_vllms_words(stack, prompt, num_prompt):
    client, fake = stack
    status, body = await post(client, "/v1/completions", {"prompt": prompt, "max_tokens": 1})
    assert status == 400, body
    assert body["error"] == {"message": vllm_words(num_prompt), "type": "invalid_request_error", "param": "prompt",
                             "code": "context_length_exceeded"}
    assert not fake.script.requests


async def test_the_same_count_as_text_gets_the_same_answer(stack):
    client, fake = stack
    text = "hello " * 10
    num_text = len(fake.tokenizer.encode(text).ids)
    ids = fake.tokenizer.encode(text * (CTX // num_text + 1)).ids
    words = fake.tokenizer.decode(ids)
    status_text, as_text = await post(client, "/v1/completions", {"prompt": words, "max_tokens": 1})
    assert status_text == 400 and "your request has" in as_text["error"]["message"], as_text
    num = int(as_text["error"]["message"].split("your request has ")[1].split()[0])
    status_ids, as_ids = await post(client, "/v1/completions", {"prompt": [5] * num, "max_tokens": 1})
    assert (status_ids, as_ids) == (status_text, as_text)


async def test_one_token_of_room_is_served(stack):
    client, fake = stack
    status, body = await post(client, "/v1/completions", {"prompt": [5] * (CTX - 1), "max_tokens": 1})
    assert status == 200 and body["usage"]["prompt_tokens"] == CTX - 1, body
