"""Stop strings against a plain Python reference (fake scheduler): random token scripts (multi-byte characters split
over byte tokens included) and random stop strings cut from their text, so that stops straddle token boundaries,
overlap each other, match in the first token, with include_stop_str_in_output and min_tokens. The streamed text
joined, the whole answer's text, finish_reason and stop_reason all equal the reference's.

The reference is vLLM's detokenizer rule (vllm/v1/engine/detokenizer.py update / check_stop_strings), written here
from the text of each token prefix: after the k-th token a stop string counts when it ends in that token's new text
and k > min_tokens (vLLM checks stop strings only once len(output_token_ids) > min_tokens; one that began earlier
still counts); the answer is the text before it (with it under include_stop_str_in_output). Of two stop strings
ending in one token, the one that starts first wins (the server's and llama.cpp's find_stopping_strings rule; vLLM
takes the earlier in its list)."""
import random

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

TOKENIZER = build_tokenizer()
WORDS = ["Hello", " world", ",", " the", " fox", " 日本", "語", " 🙂", " jumps", " over", " lazy", " dog", ".", " 12",
         " Paris", " sunny", "\n", " a", "b", " test"]
REPLACEMENT = "\ufffd"


@pytest.fixture
async def stack():
    fake = FakeServing(TOKENIZER, max_context_len=2048)
    async with fake_gateway(fake) as pair:
        yield pair


def prefix_texts(token_ids: list) -> list:
    """The text after each token: the decoded prefix less a character it ends inside (held until complete)."""
    texts = []
    for k in range(1, len(token_ids) + 1):
        text = TOKENIZER.decode(token_ids[:k])
        texts.append(text.rstrip(REPLACEMENT) if k < len(token_ids) else text)
    return texts


def reference(token_ids: list, stops: list, include: bool, min_tokens: int) -> tuple:
    """(text, finish_reason, stop_reason) of a reply of token_ids under these stop strings (max_tokens = its length)."""
    before = ""
    for k, text in enumerate(prefix_texts(token_ids), 1):
        if k > min_tokens:
            found = []
            for rank, stop in enumerate(stops):
                at = text.find(stop, max(0, len(before) - len(stop) + 1))
                if at != -1:
                    found.append((at, rank))
            if found:
                at, rank = min(found)
                return text[:at + len(stops[rank])] if include else text[:at], "stop", stops[rank]
        before = text
    return before, "length", None


def case(rng: random.Random) -> tuple:
    token_ids = TOKENIZER.encode("".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))).ids
    full = TOKENIZER.decode(token_ids)
    stops = []
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(full))
        stop = full[at:at + rng.randint(1, 6)]
        if stop and stop not in stops:
            stops.append(stop)
    return token_ids, stops, rng.random() < 0.4, rng.choice([0, 0, 1, 2, 3])


async def served(client, body: dict) -> tuple:
    """((text, finish_reason, stop_reason) whole, the same streamed) of one /v1/completions choice."""
    response = await client.post("/v1/completions", data=orjson.dumps(body))
    assert response.status == 200
    choice = orjson.loads(await response.read())["choices"][0]
    whole = (choice["text"], choice["finish_reason"], choice["stop_reason"])
    response = await client.post("/v1/completions", data=orjson.dumps({**body, "stream": True}))
    events = [e[6:] for e in (await response.text()).split("\n\n") if e.startswith("data: {")]
    chunks = [orjson.loads(e)["choices"][0] for e in events]
    streamed = ("".join(c["text"] for c in chunks), chunks[-1]["finish_reason"], chunks[-1]["stop_reason"])
    return whole, streamed


async def test_random_stop_strings_cut_where_the_reference_cuts(stack):
    client, fake = stack
    rng = random.Random(24)
    for _ in range(60):
        token_ids, stops, include, min_tokens = case(rng)
        fake.script.token_ids = token_ids
        body = {"prompt": "Hello", "max_tokens": len(token_ids), "stop": stops, "min_tokens": min_tokens,
                "include_stop_str_in_output": include, "temperature": 0}
        expected = reference(token_ids, stops, include, min_tokens)
        whole, streamed = await served(client, body)
        assert whole == streamed == expected, (token_ids, body)


@pytest.mark.parametrize("min_tokens, expected", [
    (1, ("", "stop", "AB")),        # "AB" ends in token 2, after the first min_tokens: it stops
    (2, ("ABCC", "length", None)),  # ends in token 2 = min_tokens: not checked, and never again
])
async def test_a_stop_string_ending_in_the_min_tokens_th_token_does_not_count(stack, min_tokens, expected):
    """vLLM's own case (tests/detokenizer/test_min_tokens.py, PR #22014) checks stop strings from token
    min_tokens + 1 on; the server had checked from token min_tokens on ("AB" with min_tokens 2 answered "")."""
    client, fake = stack
    fake.script.token_ids = [TOKENIZER.token_to_id(t) for t in ("A", "B", "C", "C")]
    body = {"prompt": "Hello", "max_tokens": 4, "stop": ["AB"], "min_tokens": min_tokens}
    assert await served(client, body) == (expected, expected)
