"""Gateway process: the sampling knobs of a /v1 body (chat and completions) as the internal Sampling."""
from __future__ import annotations

import re
from typing import Optional

from gateway.dry_sampling import apply_dry
from gateway.engine import Sampling
from gateway.errors import InvalidRequest
from gateway.llama_cpp_fields import apply_repeat_last_n, bias_pairs, bias_value
from gateway.llama_cpp_samplers import apply_samplers
from gateway.model import ModelCard

# A logit_bias key: ASCII digits only (str.isdigit() also passes "²" and "١", which int() rejects or reads).
_TOKEN_ID_KEY = re.compile(r"-?[0-9]+")


def read_sampling(body: dict, card: ModelCard) -> Sampling:
    """The sampling knobs of a validated /v1 body, each field left out (or null) taking the checkpoint's
    generation_config value; 400 for a logit_bias key that is no token id of the model."""
    defaults = card.generation_defaults

    def pick(name, fallback):
        value = body.get(name)
        return value if value is not None else defaults.get(name, fallback)

    given = body.get("logit_bias") or {}
    bias = bias_pairs(given, card) if isinstance(given, list) else _bias_object(given, body, card)
    top_k = int(pick("top_k", 0))
    seed = body.get("seed")
    # do_sample false (text-generation-webui's, as transformers' generate reads it): greedy, whatever the temperature.
    temperature = 0.0 if body.get("do_sample") is False else float(pick("temperature", 1.0))
    sampling = Sampling(temperature=temperature, top_p=float(pick("top_p", 1.0)),
                        top_k=0 if top_k < 0 else top_k, min_p=float(pick("min_p", 0.0)),
                        typical_p=float(pick("typical_p", 1.0)),
                        # vLLM's -1 is no seed (SamplingParams.__post_init__), as llama.cpp's server reads it: random.
                        seed=None if seed is None or seed == -1 else int(seed) % (1 << 64),
                        presence_penalty=float(body.get("presence_penalty") or 0.0),
                        frequency_penalty=float(body.get("frequency_penalty") or 0.0),
                        repetition_penalty=float(_repetition_penalty(body) or pick("repetition_penalty", 1.0)),
                        logit_bias=bias, allowed_token_ids=_allowed_token_ids(body, card))
    apply_repeat_last_n(body, sampling, card.max_context_len)
    apply_samplers(body, sampling)
    # llama.cpp's min_keep (any int; below 1 keeps the best token only, as always); past the vocabulary, all of it.
    sampling.min_keep = min(max(body.get("min_keep") or 0, 0), card.vocab_size)
    # llama.cpp's XTC (its params_from_json_cmpl defaults: probability 0, off; threshold 0.1).
    sampling.xtc_probability = float(pick("xtc_probability", 0.0))
    sampling.xtc_threshold = float(pick("xtc_threshold", 0.1))
    apply_dry(body, sampling, card)
    sampling.top_n_sigma = float(pick("top_n_sigma", -1.0))   # llama.cpp's (its default -1: off)
    sampling.dynatemp_range = float(pick("dynatemp_range", 0.0))
    sampling.dynatemp_exponent = float(pick("dynatemp_exponent", 1.0))
    sampling.mirostat = int(body.get("mirostat") or body.get("mirostat_mode") or 0)
    sampling.mirostat_tau, sampling.mirostat_eta = float(pick("mirostat_tau", 5.0)), float(pick("mirostat_eta", 0.1))
    sampling.logit_bias.update(dict.fromkeys(token_list(body, ("custom_token_bans", "banned_tokens"), card), -100.0))
    strings = body.get("banned_strings") or []
    words = [*(body.get("bad_words") or []), *([strings] if isinstance(strings, str) else strings)]
    sampling.bad_words = [ids for word in words for ids in bad_word_ids(word, card)]
    return sampling


_IDS = {"type": ["string", "array", "null"], "items": {"type": "integer"}}
# The token lists of text-generation-webui, TabbyAPI and Aphrodite (token_list), as TabbyAPI types them
# (common/sampling.py BaseSamplerRequest): banned_tokens (alias custom_token_bans) and allowed_tokens (alias
# allowed_token_ids) a list of ids or comma-separated ids, banned_strings one string or a list.
TEXTGEN_TOKEN_FIELDS = {"custom_token_bans": _IDS, "banned_tokens": _IDS, "allowed_tokens": _IDS,
                        "banned_strings": {"type": ["string", "array", "null"], "items": {"type": "string"}}}


def token_list(body: dict, names: tuple, card: ModelCard) -> list:
    """The token ids of the first of `names` the body sends: custom_token_bans / banned_tokens, never sampled (a -100
    bias, as a ban in logit_bias), or allowed_tokens. text-generation-webui and TabbyAPI take them as comma-separated
    ids ("1,2"), Aphrodite and TabbyAPI as a list; [] or "" is none. SillyTavern sends its banned tokens so to those
    sources, and banned_strings, its quoted bans, as bad_words. They were ignored: the banned tokens came out."""
    name = next((name for name in names if body.get(name)), names[0])
    ids = body.get(name)
    if not ids:
        return []
    if isinstance(ids, str):
        parts = [part.strip() for part in ids.split(",") if part.strip()]
        if not all(_TOKEN_ID_KEY.fullmatch(part) for part in parts):
            raise InvalidRequest(f"{name} must be comma-separated token ids", param=name)
        ids = [int(part) for part in parts]
    if any(not 0 <= token_id < card.vocab_size for token_id in ids):
        raise InvalidRequest(f"{name}: token ids must be in [0, {card.vocab_size})", param=name)
    return ids


def _bias_object(given: dict, body: dict, card: ModelCard) -> dict:
    """OpenAI's {token id: bias}; with llama-cpp-python's logit_bias_type "tokens" each key is a text whose tokens all
    get its bias, tokenized as its server does (llama_cpp/server/app.py _logit_bias_tokens_to_input_ids: tokenize
    with special=True, no BOS)."""
    bias = {}
    for key, value in given.items():
        if body.get("logit_bias_type") == "tokens":
            bias.update(dict.fromkeys(card.encode(key), bias_value(value)))
            continue
        if not _TOKEN_ID_KEY.fullmatch(key) or not 0 <= int(key) < card.vocab_size:
            raise InvalidRequest(f"logit_bias key '{key}' is not a token id in [0, {card.vocab_size})",
                                 param="logit_bias")
        bias[int(key)] = bias_value(value)
    return bias


def bad_word_ids(word: str, card: ModelCard) -> list:
    """A bad word's token id lists, as vLLM's SamplingParams.update_from_tokenizer makes them: the word (its leading
    spaces stripped) as written, and with one leading space where that starts with another token and has as many
    tokens, so the word is banned at the start of the text and within it."""
    out = []
    for prefix in ("", " "):
        ids = card.encode(prefix + word.lstrip())
        if ids and (not prefix or (out and ids[0] != out[-1][0] and len(ids) == len(out[-1]))):
            out.append(ids)
    return out


def _allowed_token_ids(body: dict, card: ModelCard) -> list:
    """vLLM's allowed_token_ids (only these may be sampled), refused as vLLM's engine refuses them
    (vllm/v1/engine/processor.py, _validate_allowed_token_ids): an empty list, an id outside the vocabulary."""
    ids = body.get("allowed_token_ids")
    if ids is None:
        # TabbyAPI's allowed_tokens: [] or "" is every token (its default), not vLLM's 400.
        return sorted(set(token_list(body, ("allowed_tokens",), card)))
    if not ids:
        raise InvalidRequest("allowed_token_ids is not None and empty!", param="allowed_token_ids")
    if not all(0 <= token_id < card.vocab_size for token_id in ids):
        raise InvalidRequest("allowed_token_ids contains out-of-vocab token id!", param="allowed_token_ids")
    return sorted(set(ids))


def _repetition_penalty(body: dict) -> Optional[float]:
    """vLLM's repetition_penalty, else LM Studio's repeat_penalty (None: neither sent, the checkpoint's default)."""
    value = body.get("repetition_penalty")
    return value if value is not None else body.get("repeat_penalty")
