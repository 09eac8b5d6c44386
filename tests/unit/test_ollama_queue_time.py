"""Ollama timings of a request that waited for a seat (fake scheduler): the wait is in total_duration only, as Ollama
counts the wait for a parallel slot, never in prompt_eval_duration."""
import orjson
import pytest


HI = [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("path, body", [("/api/generate", {"prompt": "Hi"}), ("/api/chat", {"messages": HI})])
async def test_time_queued_for_a_seat_is_in_total_duration_only(fake, path, body, stream):
    """Measured on make run (max_num_seqs 2, both seats busy): an 11-token /api/generate waited 6.2 s and answered
    prompt_eval_duration 6.195 s (1.8 prompt tokens a second to a client that divides); Ollama counts the wait for a
    parallel slot in total_duration alone."""
    client, servicer = fake
    servicer.script.first_delay_s = {0: 1.0}             # the scheduler kept it waiting 1 s for a seat
    response = await client.post(path, data=orjson.dumps({"model": "fake-model", "stream": stream, **body}))
    lines = [orjson.loads(line) for line in (await response.read()).splitlines() if line]
    final = lines[-1]
    assert response.status == 200 and final["done"] is True
    assert final["prompt_eval_duration"] < 500_000_000 and final["total_duration"] >= 1_000_000_000
