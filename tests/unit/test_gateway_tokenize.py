"""/v1/tokenize and /v1/detokenize as vLLM answers them (fake scheduler): token_strs, special tokens kept."""
import orjson

from gateway.fake_scheduler import build_tokenizer

TOKENIZER = build_tokenizer()
TEXT = "<|im_start|>user\nHello world<|im_end|>"


async def post_ok(client, path: str, body: dict) -> dict:
    response = await client.post(path, data=orjson.dumps(body))
    out = orjson.loads(await response.read())
    assert response.status == 200, out
    return out


async def test_return_token_strs_gives_each_ids_vocabulary_entry(stack):
    client, _ = stack
    out = await post_ok(client, "/v1/tokenize", {"prompt": TEXT, "return_token_strs": True})
    assert out["tokens"] == TOKENIZER.encode(TEXT).ids
    # transformers' convert_ids_to_tokens: byte-level pieces as stored ("Ġworld"), special tokens by name.
    assert out["token_strs"] == ["<|im_start|>", "user", "Ċ", "Hello", "Ġworld", "<|im_end|>"]
    chat = await post_ok(client, "/tokenize", {"messages": [{"role": "user", "content": "hi"}],
                                               "return_token_strs": True})
    assert chat["token_strs"] == [TOKENIZER.id_to_token(t) for t in chat["tokens"]]
    assert chat["token_strs"][:3] == ["<|im_start|>", "user", "Ċ"] and chat["count"] == len(chat["tokens"])


async def test_token_strs_is_null_unless_asked(stack):
    client, _ = stack
    for body in ({"prompt": TEXT}, {"prompt": TEXT, "return_token_strs": False}):
        out = await post_ok(client, "/v1/tokenize", body)
        assert "token_strs" in out and out["token_strs"] is None


async def test_detokenize_keeps_special_tokens_as_vllm(stack):
    client, _ = stack
    out = await post_ok(client, "/v1/detokenize", {"tokens": TOKENIZER.encode(TEXT).ids})
    assert out == {"prompt": TEXT, "content": TEXT}   # content: llama.cpp's name for it


async def test_detokenize_is_served_at_the_root_too_as_vllm(stack):
    """vLLM serves /tokenize and /detokenize at the root; /detokenize was a 404 here while /tokenize worked."""
    client, _ = stack
    ids = TOKENIZER.encode(TEXT).ids
    assert await post_ok(client, "/detokenize", {"tokens": ids}) == {"prompt": TEXT, "content": TEXT}
    assert await post_ok(client, "/tokenize", {"prompt": TEXT}) == await post_ok(client, "/v1/tokenize", {"prompt": TEXT})


async def test_detokenize_checks_the_model_and_the_ids(stack):
    client, _ = stack
    for path in ("/v1/detokenize", "/detokenize"):
        response = await client.post(path, data=orjson.dumps({"model": "gpt-4", "tokens": [1]}))
        error = orjson.loads(await response.read())["error"]
        assert response.status == 404 and error["code"] == "model_not_found" and error["param"] == "model"
        for tokens, param in (([-1], "tokens[0]"), ("abc", "tokens"), ([1.5], "tokens[0]"), (None, "tokens")):
            response = await client.post(path, data=orjson.dumps({"tokens": tokens}))
            error = orjson.loads(await response.read())["error"]
            assert response.status == 400 and error["param"] == param, error
        response = await client.post(path, data=orjson.dumps({"model": "default", "tokens": [10**6]}))
        assert response.status == 400 and orjson.loads(await response.read())["error"]["param"] == "tokens"
        # As vLLM's pydantic list[int] reads it, true is token 1.
        assert await post_ok(client, path, {"tokens": [True]}) == await post_ok(client, path, {"tokens": [1]})
