"""POST /generative_scoring, vLLM's Generative Scoring API for generative models (vLLM PR #34539): each item's
probability of the first label token as the next token after query + item (fake scheduler: the next token's
alternatives are its scripted top_ids at logprobs -1, -2, ..; a label scored teacher-forced after a prompt of L tokens
gets the fake prompt logprob -0.1 * L)."""
import math

import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

TOKENIZER = build_tokenizer()


@pytest.fixture
async def stack():
    fake = FakeServing(TOKENIZER, max_context_len=64)
    fake.script.reply = "Hello"
    fake.script.top_ids = [5, 6]
    async with fake_gateway(fake) as pair:
        yield pair


async def _scores(client, body: dict) -> dict:
    response = await client.post("/generative_scoring", json=body)
    assert response.status == 200, await response.text()
    return await response.json()


async def test_labels_among_the_next_tokens_are_softmaxed_over_the_labels(stack):
    client, fake = stack
    out = await _scores(client, {"model": "fake-model", "query": "Is it blue?", "items": [" sky", " grass"],
                                 "label_token_ids": [5, 6]})
    expected = math.exp(-1.0) / (math.exp(-1.0) + math.exp(-2.0))
    assert out["object"] == "list" and out["model"] == "fake-model"
    assert [(d["index"], d["object"]) for d in out["data"]] == [(0, "score"), (1, "score")]
    assert all(d["score"] == pytest.approx(expected) for d in out["data"])
    query, items = TOKENIZER.encode("Is it blue?").ids, [TOKENIZER.encode(t).ids for t in (" sky", " grass")]
    # One next-token request per item, query first, with the alternatives it needs (the items' requests go out
    # together: any order).
    assert sorted(list(r.prompt_token_ids) for r in fake.script.requests) == sorted(query + ids for ids in items)
    assert {(r.max_tokens, r.sampling.num_logprobs) for r in fake.script.requests} == {(1, 20)}
    assert out["usage"] == {"prompt_tokens": sum(len(query + ids) for ids in items),
                            "total_tokens": sum(len(query + ids) for ids in items), "completion_tokens": 0}


async def test_without_softmax_the_score_is_the_models_probability(stack):
    client, _ = stack
    out = await _scores(client, {"query": "Q", "items": ["a"], "label_token_ids": [6, 5], "apply_softmax": False})
    assert out["data"][0]["score"] == pytest.approx(math.exp(-2.0))


async def test_a_label_the_next_token_does_not_show_is_scored_after_the_prompt(stack):
    client, fake = stack
    out = await _scores(client, {"query": [1, 2, 3], "items": [[4], [7, 8]], "label_token_ids": [9, 5],
                                 "item_first": True})
    # Label 9 is no alternative: scored teacher-forced after item + query (the fake's -0.1 * prompt length).
    for item, length in zip(out["data"], (4, 5)):
        assert item["score"] == pytest.approx(math.exp(-0.1 * length) / (math.exp(-0.1 * length) + math.exp(-1.0)))
    forced = fake.script.requests[-2:]
    assert [list(r.prompt_token_ids) for r in forced] == [[4, 1, 2, 3, 9], [7, 8, 1, 2, 3, 9]]
    assert all(r.sampling.prompt_logprobs for r in forced)


@pytest.mark.parametrize("body,param,words", [
    ({"query": "Q", "items": ["a"], "label_token_ids": []}, "label_token_ids",
     "label_token_ids must contain at least one token ID."),
    ({"query": "Q", "items": ["a"], "label_token_ids": [100000]}, "label_token_ids",
     "label_token_id 100000 is out of vocabulary range"),
    ({"query": "Q", "items": [], "label_token_ids": [1]}, "items", "items must contain at least one item."),
    ({"query": "Q", "items": ["a", [1]], "label_token_ids": [1]}, "items[1]", "is not of type"),
    ({"query": "Q", "label_token_ids": [1]}, "items", "required"),
    ({"query": "Q " * 40, "items": ["a"], "label_token_ids": [1]}, "items[0]", "maximum context length is 64"),
    ({"query": [100000], "items": ["a"], "label_token_ids": [1]}, "query", "must be token ids"),
], ids=["no-labels", "label-out-of-vocab", "no-items", "mixed-items", "no-items-key", "too-long", "query-id"])
async def test_bad_requests_are_400s_naming_the_field(stack, body, param, words):
    client, fake = stack
    response = await client.post("/generative_scoring", json=body)
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == param and words in error["message"]
    assert not fake.script.requests


async def test_sglang_v1_score_gives_every_labels_probability(stack):
    client, fake = stack
    # SGLang's /v1/score: one item text is a list of one; apply_softmax defaults to false (the model's probabilities).
    for path in ("/v1/score", "/score"):
        response = await client.post(path, json={"query": "Is it blue?", "items": " sky", "label_token_ids": [6, 5]})
        assert response.status == 200
        assert await response.json() == {"scores": [[pytest.approx(math.exp(-2.0)), pytest.approx(math.exp(-1.0))]],
                                         "model": "fake-model", "usage": None, "object": "scoring"}
    response = await client.post("/v1/score", json={"query": "Q", "items": ["a", "b"], "label_token_ids": [5, 6],
                                                    "apply_softmax": True})
    expected = [math.exp(-1.0) / (math.exp(-1.0) + math.exp(-2.0)), math.exp(-2.0) / (math.exp(-1.0) + math.exp(-2.0))]
    assert (await response.json())["scores"] == [pytest.approx(expected)] * 2


@pytest.mark.parametrize("body,words", [
    ({"query": "Q", "items": ["a"]}, "label_token_ids must be provided"),
    ({"query": "Q", "items": ["a"], "label_token_ids": [100000]}, "Token ID 100000 is out of vocabulary"),
], ids=["no-labels", "label-out-of-vocab"])
async def test_sglang_v1_score_errors_in_its_words(stack, body, words):
    client, fake = stack
    response = await client.post("/v1/score", json=body)
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "label_token_ids" and words in error["message"]
    assert not fake.script.requests


@pytest.mark.parametrize("path,body", [
    ("/v1/score", {"text_1": "What is the capital of France?", "text_2": ["Paris", "Berlin"]}),
    ("/score", {"queries": "q", "documents": ["a"]}),
    ("/score", {"data_1": "q", "data_2": ["a"]}),
], ids=["text-pairs", "queries-documents", "data"])
async def test_vllms_pooling_score_bodies_are_its_501_saying_what_is_scored(stack, path, body):
    client, fake = stack
    response = await client.post(path, json=body)
    error = (await response.json())["error"]
    assert response.status == 501 and response.headers["x-should-retry"] == "false"
    assert error["message"].startswith("The model does not support Score API") and "/generative_scoring" in \
        error["message"] and error["code"] == "score_unsupported"
    assert not fake.script.requests


async def test_teacher_forced_scoring_on_vllms_score_path_and_v2_rerank(stack):
    client, _ = stack
    response = await client.post("/score", json={"prompt": "Q", "completion": "a"})
    assert response.status == 200 and (await response.json())["object"] == "score"
    response = await client.post("/v2/rerank", json={"query": "q", "documents": ["a"]})
    assert response.status == 501 and "does not support reranking" in (await response.json())["error"]["message"]


async def test_labels_the_next_token_misses_are_read_in_chunks_and_bounded(stack, monkeypatch):
    client, fake = stack
    monkeypatch.setattr("gateway.generative_scoring.MAX_ITEMS", 2)
    out = await _scores(client, {"query": [1], "items": [[2], [3]], "label_token_ids": [9, 10, 5]})
    # Four teacher-forced reads (labels 9 and 10 after each item), two to a scheduler request; the requests of a
    # batch go out together, so they reach the scheduler in any order.
    assert sorted(list(r.prompt_token_ids) for r in fake.script.requests[2:]) == [[1, 2, 9], [1, 2, 10], [1, 3, 9],
                                                                                 [1, 3, 10]]
    assert len(out["data"]) == 2
    monkeypatch.setattr("gateway.generative_scoring.MAX_LABEL_READS", 4)
    response = await client.post("/generative_scoring", json={"query": "Q", "items": ["a"] * 2,
                                                              "label_token_ids": [1, 2, 3]})
    assert response.status == 400 and "2 items times 3 label_token_ids are 6 scores; at most 4" in \
        (await response.json())["error"]["message"]
