"""vLLM's POST /reset_prefix_cache and SGLang's /flush_cache over the scheduler's ResetPrefixCache (fake scheduler):
each drops the prefix cache and answers as its server does. Before, both were 404 (no way to reset the cache)."""
import grpc
import pytest

from gateway.prefix_cache_routes import FLUSHED


async def test_reset_prefix_cache_is_vllms_empty_200(stack):
    client, fake = stack
    response = await client.post("/reset_prefix_cache?reset_running_requests=true")
    assert response.status == 200 and await response.read() == b""
    assert fake.num_prefix_resets == 1


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_flush_cache_answers_sglangs_text(stack, method):
    client, fake = stack
    response = await client.request(method, "/flush_cache")
    assert response.status == 200 and response.content_type == "text/plain"
    assert await response.text() == FLUSHED and FLUSHED.startswith("Cache flushed.\nPlease check backend logs")
    assert fake.num_prefix_resets == 1


async def test_head_describes_flush_cache_without_flushing(stack):
    # every GET route answers HEAD (http_compat); HEAD is a safe method (RFC 9110 9.2.1), it flushed the cache
    client, fake = stack
    for path in ("/flush_cache", "/flush_cache/"):
        response = await client.head(path)
        assert response.status == 200 and response.content_type == "text/plain" and await response.read() == b""
    assert fake.num_prefix_resets == 0


async def test_an_unreachable_scheduler_is_a_503_not_a_false_success(stack):
    client, fake = stack
    fake.script.error = grpc.StatusCode.UNAVAILABLE
    response = await client.post("/flush_cache")
    assert response.status == 503 and fake.num_prefix_resets == 0
    assert (await response.json())["error"]["type"]
