"""Gateway process: the reasoning a /v1/responses reasoning item carries in `encrypted_content`, both ways.

Nothing is stored here, so a client that sends `store: false` and leaves the reasoning text out when it sends the
conversation back (Codex drops a reasoning item's reasoning_text content and keeps only its summary and
encrypted_content, as OpenAI expects) would lose the model's reasoning between the steps of a tool loop. With
`include: ["reasoning.encrypted_content"]` each reasoning item carries its text in encrypted_content, as OpenAI
carries its reasoning there for stateless clients, and that text is read back from an input reasoning item. It is
encoded, not encrypted (there is no secret): a prefix names the format, so an OpenAI blob is never read as text.
"""
from __future__ import annotations

import base64
import binascii
from typing import Optional

from gateway.errors import InvalidRequest

INCLUDE = "reasoning.encrypted_content"
_PREFIX = "sparkinfer-reasoning-v1:"


def encode_reasoning(text: str) -> str:
    """The encrypted_content of a reasoning item whose text is `text`."""
    return _PREFIX + base64.urlsafe_b64encode(text.encode()).decode("ascii")


def decode_reasoning(value: object, where: str, field: str = "encrypted_content") -> Optional[str]:
    """The reasoning text an input item's encrypted_content (an Anthropic thinking block's signature: field)
    carries: None for none, or for another server's blob (OpenAI's or Anthropic's, which only they can read); a 400
    naming the field for one of ours that does not decode."""
    if not isinstance(value, str) or not value.startswith(_PREFIX):
        return None
    try:
        return base64.urlsafe_b64decode(value[len(_PREFIX):].encode("ascii")).decode()
    except (binascii.Error, ValueError):
        raise InvalidRequest(f"{where}.{field} is not reasoning this server wrote (it does not decode); "
                             f"send it as it was returned", param=f"{where}.{field}") from None
