"""SPARKINFER_FORCE_INCLUDE_USAGE: every stream carries usage, as vLLM's --enable-force-include-usage streams it
(should_include_usage: include_usage and continuous_usage_stats both on), whatever stream_options says (fake
scheduler)."""
import json

import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway


async def _chunks(client, path: str, body: dict) -> list:
    response = await client.post(path, json={"max_tokens": 3, "stream": True, **body})
    assert response.status == 200, await response.text()
    return [json.loads(line[6:]) for line in (await response.text()).splitlines() if line.startswith("data: {")]


@pytest.mark.parametrize("path, body", [("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
                                        ("/v1/completions", {"prompt": "hi"})], ids=["chat", "completions"])
async def test_every_chunk_carries_usage(path, body):
    # vLLM's flag (its tests/entrypoints/openai/chat_completion/test_enable_force_include_usage.py: every chunk has
    # usage, rising, then the usage chunk with no choices) is how a billing proxy counts streams whose clients never
    # ask. Before, there was no such setting: a stream without stream_options carried no usage at all.
    async with fake_gateway(FakeServing(build_tokenizer()), force_include_usage=True) as (client, _):
        chunks = await _chunks(client, path, body)
        assert all(chunk.get("usage") for chunk in chunks)
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
        totals = [chunk["usage"]["total_tokens"] for chunk in chunks]
        assert totals == sorted(totals)
    async with fake_gateway(FakeServing(build_tokenizer())) as (client, _):
        assert not any(chunk.get("usage") for chunk in await _chunks(client, path, body))
