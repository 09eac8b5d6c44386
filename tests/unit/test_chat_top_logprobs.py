"""Chat top_logprobs (fake scheduler) as vLLM answers them: the first N of {the sampled token, then the N most likely}
(serving_chat _get_top_logprobs over LogprobsProcessor._make_logprob_dict, which lists the sampled token first), so
the chosen token is always among its own top_logprobs; legacy completions keep it first with N + 1 entries."""
import orjson

from gateway.fake_scheduler import build_tokenizer
from tests.unit.test_gateway_app import events

TOKENIZER = build_tokenizer()
SAMPLED = TOKENIZER.encode("Hello").ids          # the reply's one token (logprob -0.5 from the fake)
TOP = [t for t in TOKENIZER.encode("abcdef").ids if t not in SAMPLED][:3]   # logprobs -1, -2, -3
BODY = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "logprobs": True,
        "top_logprobs": 3, "enable_thinking": False}


def ids_of(entry: dict) -> list:
    return [TOKENIZER.token_to_id(t["token"]) if TOKENIZER.token_to_id(t["token"]) is not None
            else TOKENIZER.encode(t["token"]).ids[0] for t in entry["top_logprobs"]]


async def test_sampled_token_outside_the_top_leads_them(stack):
    client, fake = stack
    fake.script.token_ids, fake.script.top_ids = SAMPLED[:1], TOP
    body = orjson.loads(await (await client.post("/v1/chat/completions", data=orjson.dumps(BODY))).read())
    entry = body["choices"][0]["logprobs"]["content"][0]
    assert [t["logprob"] for t in entry["top_logprobs"]] == [-0.5, -1.0, -2.0]
    assert ids_of(entry) == [SAMPLED[0]] + TOP[:2] and entry["token"] == entry["top_logprobs"][0]["token"]
    streamed = [e for e in events(await (await client.post("/v1/chat/completions",
                                                            data=orjson.dumps({**BODY, "stream": True}))).read())
                if e != "[DONE]" and e["choices"] and e["choices"][0].get("logprobs")]
    assert streamed[0]["choices"][0]["logprobs"]["content"][0] == entry


async def test_sampled_token_among_the_top_moves_first_once(stack):
    client, fake = stack
    fake.script.token_ids, fake.script.top_ids = SAMPLED[:1], [TOP[0], SAMPLED[0], TOP[1]]
    body = orjson.loads(await (await client.post("/v1/chat/completions", data=orjson.dumps(BODY))).read())
    entry = body["choices"][0]["logprobs"]["content"][0]
    # Its value among the top ones (-2) is the one listed; the three most likely, the sampled one first.
    assert [t["logprob"] for t in entry["top_logprobs"]] == [-2.0, -1.0, -3.0]
    assert ids_of(entry) == [SAMPLED[0], TOP[0], TOP[1]]


async def test_top_logprobs_zero_lists_none(stack):
    client, fake = stack
    fake.script.token_ids, fake.script.top_ids = SAMPLED[:1], TOP
    body = orjson.loads(await (await client.post("/v1/chat/completions",
                                                 data=orjson.dumps({**BODY, "top_logprobs": 0}))).read())
    assert body["choices"][0]["logprobs"]["content"][0]["top_logprobs"] == []
