"""Gateway process: how /v1 logprobs name a token: by its text (the model card), or, with vLLM's
return_tokens_as_token_ids, as "token_id:<id>" so that a client maps each entry back to its token id."""
from __future__ import annotations

from typing import Any


class TokenIdNames:
    """The model card as the logprob shapers read it, with every token named "token_id:<id>": chat's `token` and its
    `bytes` (of that name, as vLLM encodes it), legacy completions' `tokens` and `top_logprobs` keys. Everything else
    (text offsets, decoding, vLLM's prompt_logprobs `decoded_token`) stays the card's, as in vLLM."""

    def __init__(self, card: Any):
        self._card = card

    def token_text(self, token_id: int) -> str:
        """"token_id:<id>": the name of every token with return_tokens_as_token_ids."""
        return f"token_id:{token_id}"

    def legacy_token(self, token_id: int) -> str:
        """The same name for legacy completions' tokens and top_logprobs keys."""
        return self.token_text(token_id)

    def token_bytes(self, token_id: int) -> bytes:
        """The name's UTF-8 bytes (chat logprobs' `bytes`, as vLLM encodes it)."""
        return self.token_text(token_id).encode("utf-8")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._card, name)


def logprob_names(plan: Any, card: Any) -> Any:
    """The namer for a request's logprobs: TokenIdNames when it asked for return_tokens_as_token_ids, else the card."""
    return TokenIdNames(card) if getattr(plan, "tokens_as_ids", False) else card
