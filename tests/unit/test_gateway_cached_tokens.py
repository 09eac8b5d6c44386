"""usage.prompt_tokens_details.cached_tokens over several prompts and n > 1 (fake scheduler): counted per prompt, like
prompt_tokens, from the choice that prompt_tokens counts, and summed; never one choice's value for the whole request."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

TOKENIZER = build_tokenizer()


class CachedPerChoice(FakeServing):
    """Reports, on each call's first message, the cached tokens given for its choice index (req_id "...-<index>")."""

    def __init__(self, cached_by_index: list):
        super().__init__(TOKENIZER, max_context_len=2048)
        self.cached_by_index = cached_by_index

    async def _messages(self, request, ids, script):
        index = int(request.req_id.rsplit("-", 1)[1])
        async for message in super()._messages(request, ids, script):
            if message.num_prompt_tokens:
                message.num_cached_tokens = self.cached_by_index[index]
            yield message


async def _usage(cached_by_index: list, body: dict, stream: bool) -> dict:
    fake = CachedPerChoice(cached_by_index)
    fake.script.reply = "Hello world"
    async with fake_gateway(fake) as (client, _):
        body = {**body, "max_tokens": 4, "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        response = await client.post("/v1/completions", data=orjson.dumps(body))
        assert response.status == 200
        if not stream:
            return (await response.json())["usage"]
        chunks = [b[6:] for b in (await response.read()).decode().split("\n\n") if b.startswith("data: {")]
        return [orjson.loads(c) for c in chunks if orjson.loads(c).get("usage")][-1]["usage"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("body, cached_by_index, expected", [
    ({"prompt": ["one two three four", "five six seven eight"]}, [3, 2], 5),
    ({"prompt": ["one two three four", "five six seven eight"]}, [0, 2], 2),
    ({"prompt": ["one two three four", "five six seven eight"]}, [3, 0], 3),
    ({"prompt": "one two three four", "n": 3}, [0, 2, 2], 0),
    ({"prompt": "one two three four", "n": 3}, [2, 0, 3], 2),
    ({"prompt": ["one two three four", "five six seven eight"], "n": 2}, [1, 3, 2, 0], 3),
], ids=["two-prompts-both-hit", "second-prompt-hits", "first-prompt-hits", "n3-later-choices-hit",
        "n3-first-choice-counts", "two-prompts-n2"])
async def test_cached_tokens_are_summed_per_prompt_from_its_counted_choice(body, cached_by_index, expected, stream):
    usage = await _usage(cached_by_index, body, stream)
    assert usage["prompt_tokens_details"] == {"cached_tokens": expected}
    assert usage["prompt_tokens_details"]["cached_tokens"] <= usage["prompt_tokens"]
