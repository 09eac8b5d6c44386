"""Legacy /v1/completions logprobs token names (fake scheduler): one top_logprobs key per token id, OpenAI's
"bytes:\\x.." form for a token that is part of a character, the chosen token named as in `tokens`."""
from types import SimpleNamespace

import orjson

from gateway.fake_scheduler import build_tokenizer
from gateway.prompt_logprobs import legacy_top
from tests.unit.test_gateway_app import events

TOKENIZER = build_tokenizer()
# "日" is three byte tokens (e6 97 a5); each decodes alone to U+FFFD, as do these alternatives (e6, 9c, ac, 97).
SUN = TOKENIZER.encode("日").ids
ALTERNATIVES = TOKENIZER.encode("本").ids + SUN[1:2]
BODY = {"model": "default", "prompt": "Hi", "max_tokens": 8, "logprobs": 4}
NAMES = ["bytes:\\xe6", "bytes:\\x9c", "bytes:\\xac", "bytes:\\x97"]


async def test_byte_tokens_keep_distinct_top_logprobs_keys(stack):
    client, fake = stack
    fake.script.token_ids, fake.script.top_ids = SUN, ALTERNATIVES
    response = await client.post("/v1/completions", data=orjson.dumps(BODY))
    choice = orjson.loads(await response.read())["choices"][0]
    assert choice["text"] == "日"
    logprobs = choice["logprobs"]
    assert logprobs["tokens"][:3] == ["bytes:\\xe6", "bytes:\\x97", "bytes:\\xa5"]
    assert logprobs["top_logprobs"][0] == dict(zip(NAMES, [-1.0, -2.0, -3.0, -4.0]))
    # The third token (a5) is not among the alternatives: it is listed too, as the fifth entry.
    assert [len(top) for top in logprobs["top_logprobs"][:3]] == [4, 4, 5]


async def test_streamed_byte_tokens_keep_distinct_keys_too(stack):
    client, fake = stack
    fake.script.token_ids, fake.script.top_ids = SUN, ALTERNATIVES
    response = await client.post("/v1/completions", data=orjson.dumps({**BODY, "stream": True}))
    chunks = [e for e in events(await response.read()) if e != "[DONE]" and e["choices"]]
    tops = [top for c in chunks if c["choices"][0]["logprobs"] for top in c["choices"][0]["logprobs"]["top_logprobs"]]
    assert tops[0] == dict(zip(NAMES, [-1.0, -2.0, -3.0, -4.0])) and [len(top) for top in tops[:3]] == [4, 4, 5]


async def test_sampled_token_outside_the_top_k_is_listed_first(stack):
    """OpenAI and vLLM list the sampled token in each top_logprobs: k + 1 entries when it is not among the top k."""
    client, fake = stack
    fake.script.token_ids, fake.script.top_ids = SUN, ALTERNATIVES
    for stream in (False, True):
        response = await client.post("/v1/completions", data=orjson.dumps({**BODY, "logprobs": 1, "stream": stream}))
        body = await response.read()
        chunks = [e for e in events(body) if e != "[DONE]" and e["choices"]] if stream else [orjson.loads(body)]
        tops = [top for c in chunks if c["choices"][0]["logprobs"]
                for top in c["choices"][0]["logprobs"]["top_logprobs"]]
        assert tops[:3] == [{"bytes:\\xe6": -1.0}, {"bytes:\\x97": -0.5, "bytes:\\xe6": -1.0},
                            {"bytes:\\xa5": -0.5, "bytes:\\xe6": -1.0}]
        assert [list(top) for top in tops[1:3]] == [["bytes:\\x97", "bytes:\\xe6"], ["bytes:\\xa5", "bytes:\\xe6"]]


async def test_echoed_prompt_byte_tokens_are_named_by_their_bytes(stack):
    client, fake = stack
    body = {"model": "default", "prompt": SUN, "max_tokens": 1, "echo": True, "logprobs": 1}
    response = await client.post("/v1/completions", data=orjson.dumps(body))
    logprobs = orjson.loads(await response.read())["choices"][0]["logprobs"]
    assert logprobs["tokens"][:3] == ["bytes:\\xe6", "bytes:\\x97", "bytes:\\xa5"]


def test_two_ids_with_one_name_get_two_keys_and_the_chosen_keeps_its_name():
    names = {1: "true", 2: "true", 3: "true", 4: "bytes:\\xe2"}
    pieces = {1: "▁true", 2: "true", 3: "▁true"}
    card = SimpleNamespace(legacy_token=names.get, token_pieces=lambda ids: [pieces[i] for i in ids])
    top = legacy_top(card, 2, [(1, -0.1), (2, -0.2), (3, -0.3), (4, -0.4)])
    assert top == {"▁true": -0.1, "true": -0.2, "token_id:3": -0.3, "bytes:\\xe2": -0.4}
