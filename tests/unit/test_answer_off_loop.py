"""A whole (non-streamed) answer is built on the CPU pool, as its prompt is: SGLang's /generate with every prompt
token's logprobs and /v1/completions echoing them held the gateway's event loop 1.7-4.9 s on a real stack (128
prompts of 600 tokens, 5 alternatives each), every other client of the gateway standing still (fake scheduler)."""
import orjson
import pytest

from tests.unit.test_vllm_render import loop_gap_while

TEXT = "hello world " * 150
CASES = {
    "/generate": {"text": [TEXT] * 48, "sampling_params": {"max_new_tokens": 1}, "return_logprob": True,
                  "logprob_start_len": 0, "top_logprobs_num": 5, "return_text_in_logprobs": True},
    "/v1/completions": {"prompt": [TEXT] * 48, "max_tokens": 1, "echo": True, "logprobs": 5},
}


@pytest.mark.parametrize("path", CASES)
async def test_many_prompts_logprobs_leave_the_event_loop_to_other_requests(stack, path):
    client, fake = stack
    body = CASES[path]
    # A first request warms the route (its schema, the CPU pool's threads).
    assert (await client.post(path, data=orjson.dumps({**body, **{"text" if path == "/generate" else "prompt": TEXT}}))
            ).status == 200
    gap, took, response = await loop_gap_while(lambda: client.post(path, data=orjson.dumps(body)))
    got = orjson.loads(await response.read())
    assert response.status == 200, got
    first = got[0]["meta_info"]["input_token_logprobs"] if path == "/generate" else \
        got["choices"][0]["logprobs"]["tokens"]
    assert len(got if path == "/generate" else got["choices"]) == 48 and len(first) > 300
    assert gap < took / 3, (gap, took)
