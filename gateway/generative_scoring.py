"""Gateway process: next-token label scoring of a generative model, as vLLM's POST /generative_scoring (vLLM PR #34539,
vllm/entrypoints/openai/generative_scoring/serving.py) and SGLang's POST /v1/score (its ScoringRequest, a body with
label_token_ids) answer it: for each item, how likely each label token is as the next token after query + item (item +
query with item_first), softmaxed over the labels (apply_softmax: vLLM's default, off in SGLang) or the model's own
probability (exp of its logprob). vLLM answers each item's first-label probability, SGLang every label's.

Each prompt runs to one greedy token with the 20 most likely next tokens and their logprobs (the raw log-softmax, as
vLLM's logprob_token_ids reads it): a label among them, or the sampled token, has its logprob there. A label that is
not is scored teacher-forced after the prompt (its prompt logprob, as /v1/score reads one). A prompt that, with its
label and the one generated token, would not fit the context is a 400 (vLLM cuts it to the context, which scores a
text the client did not send).
"""
from __future__ import annotations

import math
import secrets
import time

from gateway.errors import ContextLengthExceeded, InternalError, InvalidRequest, NotImplementedApi
from gateway.gen_request import GenRequest, Sampling
from gateway.model import ModelCard

MAX_ITEMS = 512            # items in one request: each is one scheduler request (as /v1/completions' choices)
# Items times labels at most: a label the next-token answer does not show costs one more scheduler request.
MAX_LABEL_READS = 8192
_NEXT_TOKEN_TOP = 20       # alternatives the scheduler returns at most per position
_IDS = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 2 ** 31 - 1}}
SCHEMA = {
    "type": "object",
    "required": ["query", "items", "label_token_ids"],
    "properties": {
        "model": {"type": ["string", "null"]},
        "query": {"anyOf": [{"type": "string"}, _IDS]},
        "items": {"anyOf": [{"type": "array", "items": {"type": "string"}},
                            {"type": "array", "items": _IDS}]},
        "label_token_ids": {"type": "array", "items": {"type": "integer"}},
        "apply_softmax": {"type": "boolean"},
        "item_first": {"type": "boolean"},
        "add_special_tokens": {"type": "boolean"},
        "priority": {"type": "integer"},
        "request_id": {"type": "string"},
    },
}


def check_body(body: dict, card: ModelCard) -> None:
    """vLLM's checks, in its words: at least one label, each in the vocabulary, and at least one item."""
    labels = body["label_token_ids"]
    for token_id in labels:
        if token_id < 0 or token_id >= card.vocab_size:
            raise InvalidRequest(f"label_token_id {token_id} is out of vocabulary range [0, {card.vocab_size}). "
                                 f"Please provide valid token IDs.", param="label_token_ids")
    if not labels:
        raise InvalidRequest("label_token_ids must contain at least one token ID.", param="label_token_ids")
    if not body["items"]:
        raise InvalidRequest("items must contain at least one item.", param="items")
    if len(body["items"]) > MAX_ITEMS:
        raise InvalidRequest(f"'items' holds {len(body['items'])} items; at most {MAX_ITEMS} are accepted",
                             param="items")
    reads = len(body["items"]) * len(set(labels))
    if reads > MAX_LABEL_READS:
        raise InvalidRequest(f"{len(body['items'])} items times {len(set(labels))} label_token_ids are {reads} "
                             f"scores; at most {MAX_LABEL_READS} are computed in one request", param="label_token_ids")


# SGLang's /v1/score body (its ScoringRequest): items may be one text; apply_softmax defaults to false there.
SGLANG_SCHEMA = {
    "type": "object",
    "required": ["query", "items"],
    "properties": {**SCHEMA["properties"],
                   "items": {"anyOf": [{"type": "string"}, *SCHEMA["properties"]["items"]["anyOf"]]}},
}


def sglang_body(body: dict, card: ModelCard) -> dict:
    """An SGLang /v1/score body read as SGLang reads it (one item text is a list of one), checked in its words."""
    if body.get("label_token_ids") is None:
        raise InvalidRequest("label_token_ids must be provided", param="label_token_ids")
    for token_id in body["label_token_ids"]:
        if token_id < 0 or token_id >= card.vocab_size:
            raise InvalidRequest(f"Token ID {token_id} is out of vocabulary (vocab size: {card.vocab_size})",
                                 param="label_token_ids")
    items = [body["items"]] if isinstance(body["items"], str) else body["items"]
    body = {**body, "items": items}
    check_body(body, card)
    return body


def is_sglang_body(body) -> bool:
    """Whether a /v1/score body is SGLang's label scoring (query, items, label_token_ids), not a prompt + completion."""
    if not isinstance(body, dict) or "messages" in body or "prompt" in body:
        return False
    return bool({"query", "items", "label_token_ids"} & body.keys())


def refuse_pooling_score(body) -> None:
    """vLLM's Score API bodies (text_1 / text_2, queries / documents, data_1 / data_2) ask for a cross-encoder or
    embedding model's scores: vLLM answers a generative model's with its 501, and so does this server, saying what
    it scores instead (it read them as a prompt + completion body: 400 'give exactly one of messages or prompt')."""
    if not isinstance(body, dict) or "messages" in body or "prompt" in body:
        return
    if {"text_1", "text_2", "queries", "documents", "data_1", "data_2"} & body.keys():
        raise NotImplementedApi(
            "The model does not support Score API: scoring text pairs needs a cross-encoder or embedding model, and "
            "this server runs a generative model. It scores items by their next-token label probability "
            "(POST /generative_scoring, or /v1/score with query, items and label_token_ids, as SGLang) and a "
            "completion after a prompt (POST /v1/score with prompt or messages, and completion)",
            code="score_unsupported", headers={"x-should-retry": "false"})


def _ids(value, card: ModelCard, param: str) -> list:
    """A text's token ids (no special tokens: the Qwen tokenizer adds none), or the ids given, each in the
    vocabulary."""
    if isinstance(value, str):
        if card.min_prompt_tokens(value) >= card.max_context_len:
            raise _too_long(card, card.min_prompt_tokens(value), param, f"{param} holds at least")
        return card.encode(value)
    if any(token_id >= card.vocab_size for token_id in value):
        raise InvalidRequest(f"{param} must be token ids in [0, {card.vocab_size})", param=param)
    return list(value)


def _too_long(card: ModelCard, num_tokens: int, param: str, what: str) -> ContextLengthExceeded:
    ctx = card.max_context_len
    return ContextLengthExceeded(
        f"This model's maximum context length is {ctx} tokens. However, {what} {num_tokens} tokens, which leaves no "
        f"room for a label token and the next one. Please reduce the length of the query or the item.",
        param=param).counts(ctx, num_tokens)


def item_prompts(body: dict, card: ModelCard) -> list:
    """Each item's prompt ids: query + item, or item + query with item_first (CPU work: run it off the loop)."""
    query = _ids(body["query"], card, "query")
    prompts = []
    for index, item in enumerate(body["items"]):
        item_ids = _ids(item, card, f"items[{index}]")
        ids = item_ids + query if body.get("item_first") else query + item_ids
        if not ids:
            raise InvalidRequest(f"query and items[{index}] encode to no tokens: the next token needs one before it",
                                 param=f"items[{index}]")
        # The prompt, a label scored after it, and the one generated token.
        if len(ids) + 2 > card.max_context_len:
            raise _too_long(card, len(ids), f"items[{index}]", f"the query with items[{index}] holds")
        prompts.append(ids)
    return prompts


def _request(prompts: list, **kwargs) -> GenRequest:
    """One greedy token after each prompt (the scheduler runs a request to at least one), eos or not."""
    return GenRequest(req_id=f"generative-scoring-{secrets.token_hex(12)}", prompt_ids=prompts[0],
                      extra_prompt_ids=prompts[1:], max_tokens=1, sampling=Sampling(temperature=0.0),
                      ignore_eos=True, **kwargs)


def next_token_request(prompts: list) -> GenRequest:
    """The next token after each prompt, with the most likely ones and their logprobs."""
    return _request(prompts, num_logprobs=_NEXT_TOKEN_TOP)


def label_request(pairs: list) -> GenRequest:
    """Each (prompt, label) scored teacher-forced: the label's logprob after its prompt is its last prompt logprob."""
    return _request([prompt + [label] for prompt, label in pairs], num_prompt_logprobs=0)


def found_logprobs(results: list, labels: list) -> list:
    """Per prompt, {label: logprob} of the labels its next-token answer shows (the sampled token or an alternative)."""
    found = []
    for result in results:
        if len(result.logprobs) != 1:
            raise InternalError(f"the scheduler answered {len(result.logprobs)} next-token logprobs for one token")
        entry = result.logprobs[0]
        seen = dict(entry.top)
        seen[entry.token_id] = entry.logprob
        found.append({label: seen[label] for label in labels if label in seen})
    return found


def add_label_logprobs(found: list, pairs: list, results: list) -> None:
    """Fills `found` with the teacher-forced logprobs of label_request(pairs)."""
    for (index, label), result in zip(pairs, results):
        entries = result.prompt_logprobs or []
        if not entries or entries[-1].token_id != label:
            raise InternalError(f"the scheduler did not score label {label} after items[{index}]")
        found[index][label] = entries[-1].logprob


async def label_logprobs(engine, prompts: list, labels: list) -> list:
    """Per prompt, {label: logprob of it as the next token}: from one next-token request, teacher-forced for the
    labels it did not show."""
    labels = list(dict.fromkeys(labels))
    results, _ = await engine.complete(next_token_request(prompts))
    found = found_logprobs(results, labels)
    pairs = [(index, label) for index, seen in enumerate(found) for label in labels if label not in seen]
    # As many at once as one request may hold items.
    for start in range(0, len(pairs), MAX_ITEMS):
        chunk = pairs[start:start + MAX_ITEMS]
        scored, _ = await engine.complete(label_request([(prompts[index], label) for index, label in chunk]))
        add_label_logprobs(found, chunk, scored)
    return found


def probabilities(logprobs: dict, labels: list, apply_softmax: bool) -> list:
    """Each label's probability: softmaxed over the labels, or exp of its logprob (vLLM's _compute_probabilities,
    SGLang's score_request)."""
    if not apply_softmax:
        return [math.exp(logprobs[label]) for label in labels]
    top = max(logprobs.values())
    total = math.fsum(math.exp(logprob - top) for logprob in logprobs.values())
    return [math.exp(logprobs[label] - top) / total for label in labels]


async def vllm_answer(engine, body: dict, prompts: list, model: str) -> dict:
    """vLLM's GenerativeScoringResponse: each item's first-label probability; nothing generated is counted (the
    scoring token is dropped, as vLLM's prefill-only request generates none)."""
    labels = body["label_token_ids"]
    found = await label_logprobs(engine, prompts, labels)
    apply_softmax = body.get("apply_softmax", True)
    data = [{"index": index, "object": "score", "score": probabilities(seen, labels[:1], apply_softmax)[0]}
            for index, seen in enumerate(found)]
    num_prompt = sum(len(ids) for ids in prompts)
    return {"id": f"generative-scoring-{secrets.token_hex(12)}", "object": "list", "created": int(time.time()),
            "model": model, "data": data,
            "usage": {"prompt_tokens": num_prompt, "total_tokens": num_prompt, "completion_tokens": 0}}


async def sglang_answer(engine, body: dict, prompts: list, model: str) -> dict:
    """SGLang's ScoringResponse: per item, every label's probability in the order asked (no usage, as SGLang's)."""
    labels = body["label_token_ids"]
    found = await label_logprobs(engine, prompts, labels)
    apply_softmax = body.get("apply_softmax", False)
    return {"scores": [probabilities(seen, labels, apply_softmax) for seen in found], "model": model, "usage": None,
            "object": "scoring"}
