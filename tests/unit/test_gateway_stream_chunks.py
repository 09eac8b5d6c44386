"""The gateway's streamed chunks against the scripted servicer of test_gateway_app.py: continuous usage, the
fields every chunk repeats, and vLLM's return_token_ids, streamed and not."""
import orjson
import pytest

from tests.unit.test_gateway_app import USER, events, post, stack  # noqa: F401 - stack is a fixture


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "n": 2}),
    ("/v1/completions", {"prompt": "hi", "echo": True}),
])
async def test_continuous_usage_is_on_every_chunk(stack, path, body):
    """vLLM's continuous_usage_stats: every chunk (the role / echo chunks too) carries usage; prompt_tokens is
    constant and a choice's completion_tokens never decreases (each chunk counts its own choice:
    test_continuous_usage_choices.py), the usage chunk ending at the final count."""
    client, fake = stack
    fake.script.reply = "Hello world"
    options = {"include_usage": True, "continuous_usage_stats": True}
    status, raw, _ = await post(client, path, {**body, "max_tokens": 4, "stream": True, "stream_options": options})
    chunks = events(raw)[:-1]
    usages = [c["usage"] for c in chunks]
    assert status == 200 and all(u is not None for u in usages)
    assert len({u["prompt_tokens"] for u in usages}) == 1
    for index in (0, 1):
        own = [c["usage"]["completion_tokens"] for c in chunks if c["choices"] and c["choices"][0]["index"] == index]
        assert own == sorted(own)
    status, raw, _ = await post(client, path, {**body, "max_tokens": 4})
    assert chunks[-1]["choices"] == [] and usages[-1] == orjson.loads(raw)["usage"]


@pytest.mark.parametrize("path, body, entries", [
    ("/v1/completions", {"prompt": "hi", "logprobs": 0}, lambda lp: lp["tokens"]),
    ("/v1/chat/completions", {"messages": USER, "logprobs": True}, lambda lp: lp["content"]),
])
async def test_continuous_usage_counts_the_tokens_sent_so_far(stack, path, body, entries):
    """Each chunk's completion_tokens is the tokens whose text (and logprobs) have been sent up to it, 0 on the role
    chunk: the choice's scheduler call runs ahead of the writer, and the count was read from it (the fake scheduler
    answers at once, so every chunk said the final count)."""
    client, fake = stack
    fake.script.reply = "one two three four five six"
    options = {"include_usage": True, "continuous_usage_stats": True}
    status, raw, _ = await post(client, path, {**body, "max_tokens": 6, "stream": True, "stream_options": options})
    sent, counts = 0, []
    for chunk in events(raw)[:-2]:
        for choice in chunk["choices"]:
            sent += len(entries(choice["logprobs"])) if choice.get("logprobs") else 0
        counts.append((sent, chunk["usage"]["completion_tokens"]))
    assert status == 200 and counts[-1][0] == 6 and all(a == b for a, b in counts), counts


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "n": 2}),
    ("/v1/completions", {"prompt": "hi", "echo": True}),
    ("/api/v0/chat/completions", {"messages": USER}),
])
async def test_every_chunk_names_the_same_response(stack, path, body):
    """id, object, created, model and system_fingerprint (OpenAI's; it was missing) are on every chunk, the usage
    chunk too, and the same in all of them and in the non-streamed answer's fingerprint."""
    client, fake = stack
    fake.script.reply = "Hello world"
    options = {"include_usage": True}
    status, raw, _ = await post(client, path, {**body, "max_tokens": 3, "stream": True, "stream_options": options})
    chunks = events(raw)[:-1]
    keys = {(c["id"], c["object"], c["created"], c["model"], c["system_fingerprint"]) for c in chunks}
    assert status == 200 and len(keys) == 1 and next(iter(keys))[4].startswith("fp_")
    status, raw, _ = await post(client, path, {**body, "max_tokens": 3})
    assert orjson.loads(raw)["system_fingerprint"] == next(iter(keys))[4]


@pytest.mark.parametrize("path, body", [
    ("/v1/completions", {"prompt": ["hi", "hello there"], "n": 2}),
    ("/v1/completions", {"prompt": "hi", "echo": True, "stop": [" world"]}),
    ("/v1/chat/completions", {"messages": USER, "n": 2}),
])
async def test_return_token_ids(stack, path, body):
    """vLLM's return_token_ids (it was accepted and ignored): each choice's generated ids (the eos that ended it too,
    as usage counts it) and its prompt's ids; streamed, every chunk has the ids behind it and a choice's first chunk
    (chat: the role chunk, top level) the prompt's; the chunks' ids add up to the non-streamed ones."""
    client, fake = stack
    fake.script.reply = "Hello world"
    request = {**body, "max_tokens": 8, "return_token_ids": True}
    status, raw, _ = await post(client, path, request)
    answer = orjson.loads(raw)
    assert status == 200
    for choice in answer["choices"]:
        assert choice["token_ids"] and all(isinstance(t, int) for t in choice["token_ids"])
    assert sum(len(c["token_ids"]) for c in answer["choices"]) == answer["usage"]["completion_tokens"]
    prompts = [c.get("prompt_token_ids", answer.get("prompt_token_ids")) for c in answer["choices"]]
    assert all(prompts) and answer["usage"]["prompt_tokens"] == sum(len(p) for p in prompts[::body.get("n", 1)])
    status, raw, _ = await post(client, path, {**request, "stream": True})
    chunks = events(raw)[:-1]
    for choice, prompt in zip(answer["choices"], prompts):
        mine = [(chunk, c) for chunk in chunks for c in chunk["choices"] if c["index"] == choice["index"]]
        assert [t for _, c in mine for t in c["token_ids"]] == choice["token_ids"]
        first_chunk, first = mine[0]
        assert first.get("prompt_token_ids", first_chunk.get("prompt_token_ids")) == prompt
    status, raw, _ = await post(client, path, {**body, "max_tokens": 8})
    assert "token_ids" not in orjson.loads(raw)["choices"][0]


@pytest.mark.parametrize("body", [
    {"prompt": "hi"},
    {"prompt": "hi", "echo": True, "stop": [" world"]},
    {"prompt": ["hi", "hello there"], "n": 2, "logprobs": 1},
])
async def test_completion_chunks_carry_stop_reason_on_every_choice(stack, body):
    """vLLM's CompletionResponseStreamChoice (vllm/entrypoints/openai/completion/protocol.py, dumped with every
    field set) writes "stop_reason": null on each chunk before a choice's last, the echo chunk too, and the stop
    string or token id on its last; it was left out until the last, so the openai SDK's Completion model of a
    chunk had no stop_reason attribute to read."""
    from openai.types import Completion
    client, fake = stack
    fake.script.reply = "Hello world"
    status, raw, _ = await post(client, "/v1/completions", {**body, "max_tokens": 8})
    whole = {c["index"]: c["stop_reason"] for c in orjson.loads(raw)["choices"]}
    status, raw, _ = await post(client, "/v1/completions", {**body, "max_tokens": 8, "stream": True})
    chunks = [c for c in events(raw)[:-1] if c["choices"]]
    assert status == 200 and chunks
    for chunk in chunks:
        choice = chunk["choices"][0]
        assert {"index", "text", "logprobs", "finish_reason", "stop_reason"} <= set(choice)
        expected = whole[choice["index"]] if choice["finish_reason"] else None
        # The openai SDK builds each streamed chunk as its Completion model, unvalidated (construct), as here.
        assert Completion.construct(**chunk).choices[0].stop_reason == choice["stop_reason"] == expected
