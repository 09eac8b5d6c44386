"""llama.cpp /completion's tokens_cached is the tokens its slot holds once the answer is done, the prompt and every
generated token but the last one sampled (never decoded), whatever the prefix cache served; timings.cache_n is the
prompt tokens read from the cache (fake scheduler). llama-server sets n_tokens_cached = slot.prompt.n_tokens() in
send_final_response (tools/server/server-context.cpp), and its own tests pin it: test_slot_save_restore's 8-token prompt
that generated 3 more before its end token answers prompt_n 8 and tokens_cached 11, the slot's full state, also when a
second prompt re-used 3 of them (prompt_n 5). Clients show it as the context filled ("Context size: tokens_cached /
n_ctx"). It was the prefix-cache hits, 0 for a first request."""
import orjson
import pytest

from gateway.fake_scheduler import fake_gateway
from tests.unit.test_gateway_cached_tokens import CachedPerChoice

PROMPT = "one two three four five six"


async def _final(body: dict, cached: int) -> dict:
    fake = CachedPerChoice([cached])
    fake.script.reply = "Hello world, again and again"
    async with fake_gateway(fake) as (client, _):
        response = await client.post("/completion", data=orjson.dumps(body))
        assert response.status == 200, await response.text()
        if not body.get("stream"):
            return await response.json()
        events = [orjson.loads(line[6:]) for line in (await response.read()).decode().splitlines()
                  if line.startswith("data: {")]
        assert "tokens_cached" not in events[0] or events[0]["stop"]
        return events[-1]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("n_predict,cached", [(3, 0), (3, 4), (1, 0), (0, 0)],
                         ids=["three-cold", "three-after-a-hit", "one", "prompt-only"])
async def test_tokens_cached_is_the_slots_tokens_after_the_answer(n_predict, cached, stream):
    body = await _final({"prompt": PROMPT, "n_predict": n_predict, "stream": stream}, cached)
    num_prompt, num_predicted = body["tokens_evaluated"], body["tokens_predicted"]
    assert num_predicted == n_predict
    assert body["tokens_cached"] == num_prompt + max(num_predicted - 1, 0)
    assert body["timings"]["cache_n"] == cached
    assert body["timings"]["prompt_n"] == num_prompt - cached
