"""Gateway prompt logprobs with the fake scheduler (gateway/prompt_logprobs.py): what reaches the scheduler, the
vLLM prompt_logprobs shape, completions echo + logprobs with several prompts and n, streams and max_tokens 0."""
import orjson
import pytest

from gateway.model import _BYTE_DECODER


PROMPTS = ["The sky is blue", "Grass is green and soft"]


async def post(client, path, body):
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def stream(client, body) -> list:
    response = await client.post("/v1/completions", data=orjson.dumps({**body, "stream": True}))
    assert response.status == 200
    lines = (await response.read()).decode().splitlines()
    return [orjson.loads(line[6:]) for line in lines if line.startswith("data: {")]


@pytest.mark.parametrize("body,asked", [
    ({"echo": True, "logprobs": 2}, 2),
    ({"prompt_logprobs": 5}, 5),
    ({"echo": True, "logprobs": 4, "prompt_logprobs": 1}, 4),
    ({"logprobs": 3}, None),
    ({"echo": True}, None),
], ids=["echo", "vllm", "both-larger-wins", "logprobs-only", "echo-only"])
async def test_what_the_scheduler_is_asked(stack, body, asked):
    client, fake = stack
    status, _ = await post(client, "/v1/completions", {"prompt": PROMPTS[0], "max_tokens": 2, **body})
    assert status == 200
    sampling = fake.script.requests[-1].sampling
    assert sampling.prompt_logprobs == (asked is not None) and sampling.num_prompt_logprobs == (asked or 0)


async def test_vllm_shape_on_completions_and_chat(stack):
    client, fake = stack
    status, out = await post(client, "/v1/completions", {"prompt": PROMPTS[0], "max_tokens": 2, "prompt_logprobs": 2})
    prompt = list(fake.script.requests[-1].prompt_token_ids)
    positions = out["choices"][0]["prompt_logprobs"]
    assert status == 200 and len(positions) == len(prompt) and positions[0] is None
    # The prompt token first (fake rank i at position i), then the 2 most likely (fake ids 0 and 1, ranks 1 and 2).
    for i, (token_id, position) in enumerate(zip(prompt[1:], positions[1:]), 1):
        assert list(position)[0] == str(token_id) and position[str(token_id)]["rank"] == i
        assert {key: position[key]["rank"] for key in ("0", "1") if key != str(token_id)} == \
            {key: int(key) + 1 for key in ("0", "1") if key != str(token_id)}
        assert set(position[str(token_id)]) == {"logprob", "rank", "decoded_token"}
    status, chat = await post(client, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                               "prompt_logprobs": 0, "max_tokens": 2})
    assert status == 200 and len(chat["prompt_logprobs"]) == chat["usage"]["prompt_tokens"]
    assert all(len(p) == 1 for p in chat["prompt_logprobs"][1:])
    assert "prompt_logprobs" not in chat["choices"][0]


async def test_echo_logprobs_follow_each_prompt_and_choice(stack):
    client, fake = stack
    status, out = await post(client, "/v1/completions", {"prompt": PROMPTS, "n": 2, "echo": True, "logprobs": 1,
                                                         "max_tokens": 2, "temperature": 1, "seed": 3})
    assert status == 200 and len(out["choices"]) == 4
    for choice in out["choices"]:
        prompt = PROMPTS[choice["index"] // 2]
        logprobs = choice["logprobs"]
        assert choice["text"] == prompt + "Hello world"
        assert "".join(logprobs["tokens"]) == choice["text"]
        assert logprobs["text_offset"][0] == 0 and logprobs["token_logprobs"][0] is None
        assert logprobs["text_offset"] == sorted(logprobs["text_offset"])
        # vLLM's echo asks for prompt logprobs at `logprobs` and each choice returns them (test_echo_prompt_logprobs)
        assert len(choice["prompt_logprobs"]) == len(logprobs["tokens"]) - 2


async def test_stream_echo_logprobs_and_prompt_only(stack):
    client, _ = stack
    body = {"prompt": PROMPTS[1], "echo": True, "logprobs": 1, "stream_options": {"include_usage": True}}
    chunks = await stream(client, {**body, "max_tokens": 2})
    first = chunks[0]["choices"][0]
    assert first["text"] == PROMPTS[1] and first["logprobs"]["token_logprobs"][0] is None
    assert "".join(first["logprobs"]["tokens"]) == PROMPTS[1]
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == PROMPTS[1] + "Hello world"
    only = await stream(client, {**body, "max_tokens": 0})
    texts = [c["choices"][0]["text"] for c in only if c["choices"]]
    assert texts == [PROMPTS[1], ""] and only[-2]["choices"][0]["finish_reason"] == "length"
    assert only[-1]["usage"]["completion_tokens"] == 0


async def test_prompt_only_without_logprobs_never_reaches_the_scheduler(stack):
    client, fake = stack
    status, out = await post(client, "/v1/completions", {"prompt": PROMPTS[0], "echo": True, "max_tokens": 0})
    assert status == 200 and out["choices"][0]["text"] == PROMPTS[0] and not fake.script.requests
    status, out = await post(client, "/v1/completions", {"prompt": PROMPTS[0], "echo": True, "max_tokens": 0,
                                                         "prompt_logprobs": 0})
    assert status == 200 and out["choices"][0]["text"] == PROMPTS[0] and out["choices"][0]["logprobs"] is None
    assert fake.script.requests[-1].max_tokens == 1 and out["usage"]["completion_tokens"] == 0
    assert len(out["choices"][0]["prompt_logprobs"]) == out["usage"]["prompt_tokens"]



def _expected_offsets(tokenizer, ids: list, start: int = 0) -> list:
    """Oracle: each token's first byte lies in the character after the complete characters of the bytes before it."""
    offsets, seen = [], b""
    for token_id in ids:
        offsets.append(start + len(seen.decode("utf-8", errors="ignore")))
        seen += bytes(_BYTE_DECODER[ch] for ch in tokenizer.id_to_token(token_id))
    return offsets


@pytest.mark.parametrize("echo", [False, True], ids=["plain", "echo"])
async def test_text_offset_indexes_the_text_where_characters_span_tokens(stack, echo):
    client, fake = stack
    fake.script.reply = "🎉 日本 ok 👋🏽 done"
    body = {"prompt": "café 日本", "max_tokens": 40, "logprobs": 1, "echo": echo}
    status, whole = await post(client, "/v1/completions", body)
    prompt_ids = list(fake.script.requests[-1].prompt_token_ids)
    reply_ids = fake.tokenizer.encode(fake.script.reply).ids
    expected = _expected_offsets(fake.tokenizer, reply_ids, len("café 日本") if echo else 0)
    if echo:
        expected = _expected_offsets(fake.tokenizer, prompt_ids) + expected
    logprobs = whole["choices"][0]["logprobs"]
    assert status == 200 and whole["choices"][0]["text"] == ("café 日本" if echo else "") + fake.script.reply
    # The eos that ended the choice (its logprob entry, vLLM) begins where the text ends.
    expected.append(len(whole["choices"][0]["text"]))
    assert logprobs["text_offset"] == expected
    streamed = [offset for event in await stream(client, body) if event["choices"] and event["choices"][0]["logprobs"]
                for offset in event["choices"][0]["logprobs"]["text_offset"]]
    assert streamed == expected


async def test_echoed_token_prompt_keeps_special_tokens(stack):
    """A token-id prompt is echoed as vLLM detokenizes it: special tokens stay in the text, and text_offset counts
    them (an echo that dropped <|endoftext|> read "AB" with offsets past its end)."""
    client, fake = stack
    ids = fake.tokenizer.encode("A<|endoftext|>B").ids
    assert len(ids) == 3
    status, out = await post(client, "/v1/completions", {"prompt": ids, "max_tokens": 0, "echo": True, "logprobs": 0})
    choice = out["choices"][0]
    assert status == 200 and choice["text"] == "A<|endoftext|>B"
    assert choice["logprobs"]["text_offset"] == [0, 1, 14]
    chunks = await stream(client, {"prompt": ids, "max_tokens": 1, "echo": True})
    assert chunks[0]["choices"][0]["text"] == "A<|endoftext|>B"


async def test_echo_of_a_truncated_prompt_offsets_its_kept_tokens(stack):
    """truncate_prompt_tokens with echo: the whole prompt is echoed (as vLLM does) and the kept tokens' text_offset
    index their text at its end (they counted from 0, so text[offset:] did not start with the token)."""
    client, fake = stack
    fake.script.reply = "ok"
    body = {"prompt": "one two three four five six", "max_tokens": 2, "echo": True, "logprobs": 0,
            "truncate_prompt_tokens": 3}
    status, out = await post(client, "/v1/completions", body)
    choice = out["choices"][0]
    logprobs = choice["logprobs"]
    assert status == 200 and choice["text"].startswith("one two three four five six")
    assert out["usage"]["prompt_tokens"] == 3 and logprobs["text_offset"][0] > 0
    named = [(token, offset) for token, offset in zip(logprobs["tokens"], logprobs["text_offset"])
             if not token.startswith("<|")]
    assert all(choice["text"][offset:].startswith(token) for token, offset in named), named
    streamed = [offset for event in await stream(client, body) if event["choices"] and event["choices"][0]["logprobs"]
                for offset in event["choices"][0]["logprobs"]["text_offset"]]
    assert streamed == logprobs["text_offset"]
