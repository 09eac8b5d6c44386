"""Unit tests: vLLM's cache_salt isolates prefix-cache entries (scheduler driven by hand; the gateway's fake scheduler
for the field reaching it)."""
import orjson
import pytest

from tests.unit.test_prefix_cache import cached_lengths, chat, make_scheduler, reference, request
from tests.unit.test_scheduler import FakeWorker, run_to_end


def serve_salted(sched, worker, req_id, prompt, salt):
    req = request(req_id, prompt)
    req.cache_salt = salt
    sched.add_request(req)
    tokens, _ = run_to_end(sched, worker)
    return tokens[req_id], req


def test_a_salted_prompt_hits_only_entries_of_its_own_salt():
    """vLLM mixes cache_salt into the first block's hash, so only requests with the same salt share cached blocks (its
    prefix caching docs, "Cache isolation for security"); a salt had no effect here: tenant B's request reused
    tenant A's cached system prompt, which a timing probe can tell."""
    sched, worker = make_scheduler(), FakeWorker()
    prompt = chat(1, 70)
    _, first = serve_salted(sched, worker, "a", prompt, "tenant-a")
    assert first.num_cached_tokens == 0 and cached_lengths(sched) == [64, 80]
    for req_id, salt, cached in [("b", "tenant-b", 0), ("plain", "", 0), ("a2", "tenant-a", 80),
                                 ("b2", "tenant-b", 80), ("plain2", "", 80)]:
        tokens, req = serve_salted(sched, worker, req_id, prompt + [5, 6], salt)
        assert req.num_cached_tokens == cached, req_id
        assert tokens == reference(prompt + [5, 6])
    sched.self_check()


@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 4}),
    ("/v1/responses", {"input": "hi", "max_output_tokens": 4})], ids=["chat", "completions", "responses"])
async def test_cache_salt_reaches_the_scheduler(stack, path, body):
    """The routes vLLM takes cache_salt on pass it with every choice (n = 2 here where the route has n)."""
    client, fake = stack
    body = {"model": "default", **body, "cache_salt": "tenant-a"}
    if path != "/v1/responses":
        body["n"] = 2
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    assert [r.cache_salt for r in fake.script.requests] == ["tenant-a"] * (1 if path == "/v1/responses" else 2)
    response = await client.post(path, data=orjson.dumps({k: v for k, v in body.items() if k != "cache_salt"}))
    assert response.status == 200 and fake.script.requests[-1].cache_salt == ""
