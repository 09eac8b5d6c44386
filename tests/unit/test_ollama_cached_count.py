"""Ollama's /api/chat and /api/generate report the prompt tokens the prefix cache served as prompt_eval_cached_count
(Ollama's api.Metrics.PromptEvalCachedCount: 'number of prompt tokens read from the prompt cache', from its runner's
cache_n; stdapi-ai/stdapi.ai#252), beside prompt_eval_count, which stays the whole prompt (fake scheduler)."""
import json

import pytest

USER = [{"role": "user", "content": "hi"}]


async def _final(client, path: str, body: dict, stream: bool) -> dict:
    response = await client.post(path, json={"model": "fake-model", "think": False, "stream": stream, **body})
    assert response.status == 200, await response.text()
    if not stream:
        return await response.json()
    lines = [json.loads(line) for line in (await response.text()).splitlines() if line.strip()]
    assert all("prompt_eval_cached_count" not in line for line in lines[:-1])
    return lines[-1]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("path, body", [("/api/chat", {"messages": USER}), ("/api/generate", {"prompt": "hi"})],
                         ids=["chat", "generate"])
@pytest.mark.parametrize("cached", [0, 8], ids=["miss", "hit"])
async def test_the_cached_prompt_tokens_are_reported(stack, path, body, stream, cached):
    client, fake = stack
    fake.script.cached_tokens = cached
    final = await _final(client, path, body, stream)
    prompt = len(fake.script.requests[-1].prompt_token_ids)
    assert (final["done"], final["prompt_eval_count"], final["prompt_eval_cached_count"]) == (True, prompt, cached)
    keys = list(final)
    assert keys[keys.index("prompt_eval_count") + 1] == "prompt_eval_cached_count"
