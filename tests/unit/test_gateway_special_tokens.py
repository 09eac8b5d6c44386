"""vLLM's skip_special_tokens and the token that ends a request (fake scheduler): special tokens in the text only
when asked, on chat and completions, streamed and not."""
import orjson
import pytest

from gateway.fake_scheduler import build_tokenizer
from tests.unit.test_gateway_app import events

TOKENIZER = build_tokenizer()
WITH_SPECIALS = "Hello<|im_start|> world<|endoftext|>!"
CHAT = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "enable_thinking": False}
COMPLETION = {"model": "default", "prompt": "hi"}
ROUTES = [("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)]


async def text_of(client, path: str, body: dict) -> str:
    """The first choice's text (chat content or completion text), from the JSON body or the joined SSE deltas."""
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200
    if not body.get("stream"):
        choice = orjson.loads(await response.read())["choices"][0]
        return choice["message"]["content"] if "message" in choice else choice["text"]
    chunks = [e for e in events(await response.read()) if e != "[DONE]" and e["choices"]]
    return "".join(c["choices"][0]["delta"].get("content") or "" if "delta" in c["choices"][0]
                   else c["choices"][0]["text"] for c in chunks)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("path,base", ROUTES, ids=["chat", "completions"])
async def test_skip_special_tokens_false_keeps_them_in_the_text(stack, path, base, stream):
    client, fake = stack
    fake.script.token_ids = TOKENIZER.encode(WITH_SPECIALS).ids
    body = {**base, "max_tokens": 5, "stream": stream}
    assert await text_of(client, path, {**body, "skip_special_tokens": False}) == WITH_SPECIALS
    assert await text_of(client, path, body) == "Hello world!"
    assert await text_of(client, path, {**body, "skip_special_tokens": True}) == "Hello world!"


async def test_text_offset_counts_kept_special_tokens(stack):
    client, fake = stack
    fake.script.token_ids = TOKENIZER.encode(WITH_SPECIALS).ids
    body = {**COMPLETION, "max_tokens": 5, "logprobs": 0}
    for skip, offsets in ((False, [0, 5, 17, 23, 36]), (True, [0, 5, 5, 11, 11])):
        response = await client.post("/v1/completions", data=orjson.dumps({**body, "skip_special_tokens": skip}))
        assert orjson.loads(await response.read())["choices"][0]["logprobs"]["text_offset"] == offsets
