"""vLLM's continuous_usage_stats with n > 1 or several prompts: each chunk carries its own choice's counts (fake
scheduler)."""
import orjson
import pytest

USER = [{"role": "user", "content": "hi"}]
OPTIONS = {"include_usage": True, "continuous_usage_stats": True}
REPLY = "one two three four five six"


def events(raw: bytes) -> list:
    return [orjson.loads(block[6:]) for block in raw.decode().split("\n\n")
            if block.startswith("data: {")]


def num_entries(path: str, logprobs) -> int:
    if not logprobs:
        return 0
    return len(logprobs["tokens"] if path == "/v1/completions" else logprobs["content"])


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "logprobs": True, "enable_thinking": False}),
    ("/v1/completions", {"prompt": "hi", "logprobs": 0}),
])
async def test_each_chunk_counts_its_own_choice(stack, path, body):
    # vLLM (serving_chat.py / serving_completion.py): chunk.usage = UsageInfo(prompt_tokens=num_prompt_tokens,
    # completion_tokens=previous_num_tokens[i]), the choice i of that chunk; only the final usage chunk sums them.
    client, _ = stack
    response = await client.post(path, data=orjson.dumps({**body, "n": 3, "max_tokens": 6, "stream": True,
                                                          "stream_options": OPTIONS}))
    chunks = events(await response.read())
    sent = {0: 0, 1: 0, 2: 0}
    for chunk in chunks[:-1]:
        (choice,) = chunk["choices"]
        sent[choice["index"]] += num_entries(path, choice.get("logprobs"))
        assert chunk["usage"]["completion_tokens"] == sent[choice["index"]], chunk
        assert chunk["usage"]["total_tokens"] == chunk["usage"]["prompt_tokens"] + sent[choice["index"]]
    final = chunks[-1]
    assert final["choices"] == [] and final["usage"]["completion_tokens"] == sum(sent.values()) == 18


async def test_each_completion_chunk_counts_its_own_prompt(stack):
    # vLLM's completions: prompt_tokens=num_prompt_tokens[prompt_idx] on each chunk; the final usage sums the prompts.
    client, fake = stack
    prompts = ["hi", "a much longer prompt than the first one"]
    lengths = [len(fake.tokenizer.encode(p).ids) for p in prompts]
    response = await client.post("/v1/completions", data=orjson.dumps({
        "prompt": prompts, "max_tokens": 2, "stream": True, "stream_options": OPTIONS}))
    chunks = events(await response.read())
    for chunk in chunks[:-1]:
        (choice,) = chunk["choices"]
        assert chunk["usage"]["prompt_tokens"] == lengths[choice["index"]], chunk
    assert chunks[-1]["usage"]["prompt_tokens"] == sum(lengths) and lengths[0] != lengths[1]


@pytest.mark.parametrize("path", ["/v1/completions", "/api/v0/completions"])
async def test_an_echo_of_max_tokens_0_counts_each_choice_s_own_prompt(stack, path):
    """echo with max_tokens 0 generates nothing, but each choice's chunks still count its own prompt, as every other
    completions stream does; they said the prompts' sum (each chunk of ["hi", longer] said both prompts' tokens)."""
    client, fake = stack
    prompts = ["hi", "a much longer prompt than the first one"]
    lengths = [len(fake.tokenizer.encode(p).ids) for p in prompts]
    response = await client.post(path, data=orjson.dumps({
        "prompt": prompts, "n": 2, "echo": True, "max_tokens": 0, "stream": True, "stream_options": OPTIONS}))
    chunks = events(await response.read())
    assert len(chunks) == 9 and not fake.script.requests
    for chunk in chunks[:-1]:
        (choice,) = chunk["choices"]
        assert chunk["usage"] == {"prompt_tokens": lengths[choice["index"] // 2], "completion_tokens": 0,
                                  "total_tokens": lengths[choice["index"] // 2],
                                  "prompt_tokens_details": {"cached_tokens": 0}}, chunk
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] == sum(lengths)
