"""Each prompt's answer of a several-prompt request counts that prompt's own prefix-cache hits, whole or streamed
(fake scheduler): SGLang's /generate meta_info.cached_tokens (TokenizerManager: the request's own
num_cached_tokens) and llama.cpp's /completion timings.cache_n (its slot's n_prompt_tokens_cache),
as they are for one prompt. A whole answer gave every prompt the request's sum: two prompts of 20 tokens with 12 and
5 cached both said 17, more than a prompt's own tokens."""
import orjson
import pytest

from gateway.fake_scheduler import fake_gateway
from tests.unit.test_gateway_cached_tokens import CachedPerChoice

PROMPTS = ["one two three four five six", "seven eight nine ten eleven twelve"]
CACHED = [4, 1]


def _events(raw: bytes) -> list:
    return [orjson.loads(line[6:]) for line in raw.decode().splitlines()
            if line.startswith("data: {")]


async def _answers(path: str, body: dict, stream: bool) -> list:
    fake = CachedPerChoice(CACHED)
    fake.script.reply = "Hello world"
    async with fake_gateway(fake) as (client, _):
        response = await client.post(path, data=orjson.dumps({**body, "stream": stream}))
        assert response.status == 200, await response.text()
        if not stream:
            return await response.json()
        events = _events(await response.read())
        if path == "/generate":
            # the last event of each prompt: the output so far, its meta_info final
            return [[e for e in events if e["index"] == i][-1] for i in range(len(PROMPTS))]
        return sorted((e for e in events if e["stop"]), key=lambda e: e["index"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_sglang_generate_counts_each_prompts_own_cached_tokens(stream):
    answers = await _answers("/generate", {"text": PROMPTS, "sampling_params": {"max_new_tokens": 2}}, stream)
    assert [a["meta_info"]["cached_tokens"] for a in answers] == CACHED
    assert all(a["meta_info"]["cached_tokens"] <= a["meta_info"]["prompt_tokens"] for a in answers)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_llama_cpp_completion_counts_each_prompts_own_cached_tokens(stream):
    answers = await _answers("/completion", {"prompt": PROMPTS, "n_predict": 2}, stream)
    assert [a["timings"]["cache_n"] for a in answers] == CACHED
    assert [a["timings"]["prompt_n"] for a in answers] == [a["tokens_evaluated"] - c
                                                           for a, c in zip(answers, CACHED)]
