"""Gateway process: llama.cpp's DRY request fields (dry_multiplier, dry_base, dry_allowed_length, dry_penalty_last_n,
dry_sequence_breakers) read as its server reads them (tools/server/server-task.cpp params_from_json_cmpl) onto the
Sampling the worker runs (worker/dry.py); the sequence breakers become the token sequences llama.cpp's
get_overlapping_token_sequences finds for them in the vocabulary (src/llama-sampling.cpp, llama_sampler_init_dry)."""
from __future__ import annotations

import json
import threading

from gateway.errors import InvalidRequest
from gateway.model import ModelCard

# llama.cpp's defaults (common/common.h common_params_sampling) and its limits on a breaker (llama_sampler_init_dry).
DEFAULT_BREAKERS = ["\n", ":", "\"", "*"]
_MAX_CHAR_LEN, _MAX_SEQ_LEN = 40, 20
_LOCK = threading.Lock()

SCHEMA = {"dry_multiplier": {"type": ["number", "null"]}, "dry_base": {"type": ["number", "null"]},
          "dry_allowed_length": {"type": ["integer", "null"]},
          "dry_penalty_last_n": {"type": ["integer", "null"], "minimum": -1},
          # A list of strings, or that list as JSON text (KoboldCpp reads SillyTavern's so).
          "dry_sequence_breakers": {"type": ["array", "string", "null"], "items": {"type": "string"}}}


def _breaker_strings(body: dict) -> list:
    """The request's breakers (llama.cpp's four unless sent); an empty list is llama.cpp's 400."""
    value = body.get("dry_sequence_breakers")
    if value is None:
        return DEFAULT_BREAKERS
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise InvalidRequest("dry_sequence_breakers must be an array of strings or a JSON-encoded array of "
                                 "strings", param="dry_sequence_breakers")
    if not value:
        raise InvalidRequest("Error: dry_sequence_breakers must be a non-empty array of strings",
                             param="dry_sequence_breakers")
    return value


def _vocab_bytes(card: ModelCard) -> list:
    """Each token's bytes, special tokens as their text (llama.cpp detokenizes them so), read once per card."""
    table = card.__dict__.get("_dry_vocab")
    if table is None:
        table = [card.token_bytes(i) for i in range(card.tokenizer_vocab_size)]
        card.__dict__["_dry_vocab"] = table
    return table


def overlapping_sequences(card: ModelCard, breaker: str) -> list:
    """[[head, *tail]] for one breaker, as get_overlapping_token_sequences: a token holding the whole breaker is a
    head with no tail; a token ending in the breaker's first bytes is a head whose tail tokenizes the rest (at most
    20 tokens); cached per card and breaker."""
    cache = card.__dict__.setdefault("_dry_breakers", {})
    if breaker in cache:
        return cache[breaker]
    text = breaker.encode("utf-8")[:_MAX_CHAR_LEN]
    out = []
    for token_id, word in enumerate(_vocab_bytes(card)):
        if text in word:
            out.append([token_id])
            continue
        tails = []
        pos = word.find(text[:1])
        while pos != -1:
            rest = len(word) - pos
            if rest < len(text) and word[pos:] == text[:rest]:
                tail = card.encode(text[rest:].decode("utf-8", "ignore"))[:_MAX_SEQ_LEN]
                if tail not in tails:
                    tails.append(tail)
            pos = word.find(text[:1], pos + 1)
        out.extend([token_id, *tail] for tail in tails)
    with _LOCK:
        cache[breaker] = out
    return out


def _int32(value: int) -> int:
    """An integer field held to the int32 the wire carries (pb.SamplingParams), as llama.cpp's int32_t holds it: a
    length or window past 2^31 - 1 means the same as 2^31 - 1 (no sequence that long, the whole context); it was a 500
    ('Value out of range') when the step was built."""
    return max(-(2 ** 31), min(int(value), 2 ** 31 - 1))


def apply_dry(body: dict, sampling, card: ModelCard) -> None:
    """DRY's fields on `sampling` (off unless dry_multiplier is set, as llama.cpp's default 0); a dry_base below 1
    takes llama.cpp's default 1.75, as its server does."""
    breakers = _breaker_strings(body)
    sampling.dry_multiplier = float(body.get("dry_multiplier") or 0.0)
    base = body.get("dry_base")
    sampling.dry_base = 1.75 if base is None or base < 1 else float(base)
    allowed = body.get("dry_allowed_length")
    sampling.dry_allowed_length = 2 if allowed is None else _int32(allowed)
    window = body.get("dry_penalty_last_n")
    sampling.dry_penalty_last_n = -1 if window is None else _int32(window)
    sampling.dry_sequence_breakers = list(breakers)
    if sampling.dry_multiplier != 0 and sampling.dry_penalty_last_n != 0:
        sampling.dry_breaker_ids = [seq for b in breakers if b for seq in overlapping_sequences(card, b)]
