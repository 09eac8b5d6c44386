"""Worker and gateway processes: llguidance's tokenizer for grammar masks (the worker's) and grammar checks (the
gateway's, gateway/grammar_check.py), whose forced text is tokenized as plain text. Kept here because both processes'
images copy proto/.

llguidance reads every added token of tokenizer.json as a special token (`<think>`, `<tool_call>`, `<tool_response>`
as well as `<|im_end|>`): a grammar names one as a token (`<think>` in Lark), and its quoted or regex text is written
byte by byte, never by that token. Where a grammar forces text, though (a regex `<think>hi</think>`, a JSON schema's
`const: "<tool_call>"`, one guided choice), llguidance tokenizes the forced text with the tokenizer itself, whose
added vocabulary gives the added token; the mask then allowed that token alone, and consuming it failed ("token
�[1022] doesn't satisfy the grammar; forced bytes: got '<'; applying 'ÿ'": outlines#1771, outlines PR #1965), a 400
for every such request, or an empty stream. Here the forced text is tokenized with the added tokens taken out of the
tokenizer, so it is the bytes' own tokens (`<think` `>`), which the grammar accepts, as xgrammar, vLLM's default
backend, matches such a literal by its characters; the vocabulary, its special tokens and the eos ids are llguidance's
own reading of tokenizer.json, unchanged. The gateway's check of a grammar before the request starts follows the text
it forces too, so it tokenizes forced text the same way: with llguidance's own tokenizer it forced the added token,
failed there and refused such a schema as a grammar that "allows no output".
"""
import json
from typing import Optional

import llguidance
from tokenizers import Tokenizer


class _PlainTextTokenizer:
    """What llguidance's TokenizerWrapper reads: each id's bytes and the special ids as llguidance's own tokenizer has
    them, and a tokenize call that never yields an added token."""

    def __init__(self, base: llguidance.LLTokenizer, tokenizer_json: str):
        self.eos_token_id = base.eos_token
        self.bos_token_id = None
        self.tokens = [base.decode_bytes([token_id]) for token_id in range(base.vocab_size)]
        self.special_token_ids = [token_id for token_id in range(base.vocab_size) if base.is_special_token(token_id)]
        spec = json.loads(tokenizer_json)
        spec["added_tokens"] = []
        self._plain = Tokenizer.from_str(json.dumps(spec))

    def __call__(self, text: str) -> list:
        # A str only: TokenizerWrapper then passes text, not bytes (it probes with b"test").
        if not isinstance(text, str):
            raise TypeError("text, not bytes")
        return self._plain.encode(text, add_special_tokens=False).ids


def grammar_tokenizer(tokenizer_json: str, eos_token_ids: list, n_vocab: Optional[int] = None) -> llguidance.LLTokenizer:
    """llguidance's tokenizer of tokenizer.json (n_vocab rows when given; ValueError where the tokenizer is larger),
    with forced text tokenized as plain text (module docstring)."""
    if n_vocab is None:
        base = llguidance.LLTokenizer(tokenizer_json, eos_token=eos_token_ids)
    else:
        base = llguidance.LLTokenizer(tokenizer_json, n_vocab=n_vocab, eos_token=eos_token_ids)
    wrapper = llguidance.TokenizerWrapper(_PlainTextTokenizer(base, tokenizer_json))
    return llguidance.LLTokenizer(wrapper, n_vocab=base.vocab_size, eos_token=eos_token_ids)
