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


def entry(token: str, logprob: float) -> dict:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


async def chat_logprobs(client, body: dict) -> tuple[list, dict]:
    """(logprobs.content entries of choice 0, usage), whole or joined from the stream's chunks."""
    response = await client.post("/v1/chat/completions", data=orjson.dumps(body))
    if not body.get("stream"):
        out = orjson.loads(await response.read())
        return out["choices"][0]["logprobs"]["content"], out["usage"]
    chunks = [e for e in events(await response.read()) if e != "[DONE]"]
    entries = [item for c in chunks if c["choices"] and c["choices"][0]["logprobs"]
               for item in c["choices"][0]["logprobs"]["content"]]
    finish = next(c["choices"][0] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"])
    # vLLM sends the eos entry on the last chunk, with the finish reason.
    assert finish["logprobs"]["content"] == entries[-1:]
    return entries, chunks[-1]["usage"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_chat_logprobs_hold_the_eos_that_usage_counts(stack, stream):
    client, fake = stack
    fake.script.top_ids = TOKENIZER.encode("!").ids
    body = {**CHAT, "logprobs": True, "top_logprobs": 2, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    entries, usage = await chat_logprobs(client, body)
    assert [e["token"] for e in entries] == ["Hello", " world", "<|im_end|>"]
    assert entries[-1] == {**entry("<|im_end|>", -0.25), "top_logprobs": [entry("<|im_end|>", -0.25),
                                                                          entry("!", -1.25)]}
    assert usage["completion_tokens"] == len(entries) == 3


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_completion_logprobs_hold_the_eos_that_usage_counts(stack, stream):
    client, _ = stack
    body = {**COMPLETION, "logprobs": 0, "stream": stream, **({"stream_options": {"include_usage": True}}
                                                              if stream else {})}
    response = await client.post("/v1/completions", data=orjson.dumps(body))
    if stream:
        chunks = [e for e in events(await response.read()) if e != "[DONE]"]
        parts = [c["choices"][0]["logprobs"] for c in chunks if c["choices"] and c["choices"][0]["logprobs"]]
        tokens = [t for p in parts for t in p["tokens"]]
        token_logprobs = [t for p in parts for t in p["token_logprobs"]]
        usage = chunks[-1]["usage"]
    else:
        out = orjson.loads(await response.read())
        logprobs, usage = out["choices"][0]["logprobs"], out["usage"]
        tokens, token_logprobs = logprobs["tokens"], logprobs["token_logprobs"]
    assert tokens == ["Hello", " world", "<|im_end|>"] and token_logprobs == [-0.5, -0.5, -0.25]
    assert usage["completion_tokens"] == len(tokens)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("path,base", ROUTES, ids=["chat", "completions"])
async def test_include_stop_str_in_output_keeps_a_stop_token_ids_token(stack, path, base, stream):
    client, fake = stack
    fake.script.stop_id = TOKENIZER.token_to_id("!")
    body = {**base, "stop_token_ids": [fake.script.stop_id], "stream": stream}
    assert await text_of(client, path, {**body, "include_stop_str_in_output": True}) == "Hello world!"
    assert await text_of(client, path, body) == "Hello world"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("path,base", ROUTES, ids=["chat", "completions"])
async def test_the_eos_shows_only_with_include_stop_and_skip_special_tokens_false(stack, path, base, stream):
    client, _ = stack
    body = {**base, "stream": stream, "include_stop_str_in_output": True}
    assert await text_of(client, path, body) == "Hello world"
    assert await text_of(client, path, {**body, "skip_special_tokens": False}) == "Hello world<|im_end|>"
    assert await text_of(client, path, {**body, "include_stop_str_in_output": False,
                                         "skip_special_tokens": False}) == "Hello world"
