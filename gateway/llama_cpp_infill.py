"""Gateway process: llama.cpp's POST /infill prompt (fill in the middle), built as its server builds it; the route then
answers it as /completion does.

As tools/server/server-context.cpp handle_infill and server-common.cpp format_prompt_infill: the model's FIM tokens
(501 when the vocabulary lacks them), the body checked in llama.cpp's words, then the repo-level pattern

    [FIM_REP]myproject\n[FIM_SEP]filename0\nextra0...[FIM_SEP]filename\n[FIM_PRE]prefix prompt[FIM_SUF]suffix[FIM_MID]

with the prefix cut to its last 3/4 of a batch and the suffix to its first 1/4 (less the prompt), and the extra
chunks (input_extra) to what the context leaves, the latest kept.
"""
from __future__ import annotations

from typing import Optional

from gateway.errors import InvalidRequest, NotImplementedApi
from gateway.llama_cpp_fields import content_ids

# The FIM tokens llama.cpp's vocabulary loader recognizes by their text (src/llama-vocab.cpp), per role.
_FIM_TEXTS = {
    "pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>"),
    "suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>"),
    "mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>"),
    "rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "sep": ("<|file_sep|>", "<file_sep>"),
}
_MISSING = {"pre": "prefix", "suf": "suffix", "mid": "middle"}
# llama-server's defaults the prompt is cut with: its batch (-b 2048) and n_predict (-1, as the request's is not used).
_N_BATCH, _N_PREDICT = 2048, -1
# The separator of extra chunks for a vocabulary without a file separator token ("\n\n--- snippet ---\n\n").
_CHUNK_PREFIX = "\n\n--- snippet ---\n\n"


def fim_tokens(card) -> dict:
    """role -> token id of the FIM tokens the tokenizer has (pre, suf, mid, and the optional rep and sep)."""
    found = {}
    for role, texts in _FIM_TEXTS.items():
        ids = [card.tokenizer.token_to_id(text) for text in texts]
        token_id: Optional[int] = next((i for i in ids if i is not None), None)
        if token_id is not None:
            found[role] = token_id
    return found


def _check_body(body) -> list:
    """llama.cpp's checks of an /infill body, in its words; the extra chunks (input_extra, default none)."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", param=None)
    if body.get("prompt") is not None and not isinstance(body["prompt"], str):
        raise InvalidRequest('"prompt" must be a string', param="prompt")
    for name in ("input_prefix", "input_suffix"):
        if name not in body:
            raise InvalidRequest(f'"{name}" is required', param=name, code="missing_required_parameter")
    extra = body.get("input_extra", [])
    if not isinstance(extra, list):
        raise InvalidRequest('"input_extra" must be an array of {"filename": string, "text": string}',
                             param="input_extra")
    for chunk in extra:
        if not isinstance(chunk, dict) or not isinstance(chunk.get("text"), str):
            raise InvalidRequest('extra_context chunk must contain a "text" field with a string value',
                                 param="input_extra")
        if "filename" in chunk and not isinstance(chunk["filename"], str):
            raise InvalidRequest('extra_context chunk\'s "filename" field must be a string', param="input_extra")
    return extra


def _extra_tokens(card, fim: dict, extra: list) -> list:
    """The repo-level context before the FIM prefix: the repo name, then each chunk under its file name."""
    tokens = [fim["rep"], *card.encode("myproject\n")] if "rep" in fim else []
    for chunk in extra:
        if "sep" in fim:
            tokens += [fim["sep"], *card.encode(chunk.get("filename", "tmp") + "\n")]
        else:
            tokens += card.encode(_CHUNK_PREFIX)
        tokens += card.encode_literal(chunk["text"])
    if "sep" in fim:
        tokens += [fim["sep"], *card.encode("filename\n")]
    return tokens


def infill_prompt(body, card) -> list:
    """The token ids llama.cpp's /infill completes for this body (module docstring); 501 for a model without the
    prefix, suffix and middle tokens, in llama.cpp's words."""
    fim = fim_tokens(card)
    missing = "".join(f"{_MISSING[role]} token is missing. " for role in _MISSING if role not in fim)
    if missing:
        raise NotImplementedApi(f"Infill is not supported by this model: {missing}", code="not_supported",
                                headers={"x-should-retry": "false"})
    extra = _check_body(body)
    prefix = content_ids(card, body["input_prefix"], False)
    suffix = content_ids(card, body["input_suffix"], False)
    prompt = card.encode(body.get("prompt") or "")
    n_prefix = min(len(prefix), 3 * (_N_BATCH // 4))
    n_suffix = min(len(suffix), max(0, _N_BATCH // 4 - (2 + len(prompt))))
    extra_ids = _extra_tokens(card, fim, extra)
    n_extra = min(max(0, card.max_context_len - _N_BATCH - 2 * _N_PREDICT), len(extra_ids))
    head = [fim["pre"], *prefix[len(prefix) - n_prefix:], *prompt]
    return [*extra_ids[len(extra_ids) - n_extra:], *head, fim["suf"], *suffix[:n_suffix], fim["mid"]]
