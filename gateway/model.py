"""Gateway process: the served model as the scheduler's Info describes it (tokenizer, template, limits, defaults)."""
from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence

import orjson
from tokenizers import Tokenizer

from gateway.chat import compile_template
from gateway.control_tokens import MARK_END, MARK_START, Marker, MarkedEncoder, control_tokens
from gateway.model_config import json_object, positive_int, string_list, special_token_text, template_from_config
from gateway.stream import utf8_incomplete_tail

# Sampling fields generation_config.json may set, and the request field each one defaults.
_GENERATION_DEFAULTS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
_SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "pad_token", "unk_token")
KEEP_IN_TEXT = frozenset({"<think>", "</think>", "<tool_call>", "</tool_call>"})
# How many times fewer UTF-8 bytes a normalizer can leave (NFC composes Hangul jamo 9 -> 3 bytes; NFKC maps a
# 4-byte character to 1 byte). Normalizers not listed (strip, replace, ...) can delete text: no byte bound.
_NORMALIZER_SHRINK = {None: 1, "NFC": 3, "NFD": 2, "NFKC": 4, "NFKD": 4}


def _bytes_to_unicode() -> dict:
    """GPT-2's byte <-> printable-character table that byte-level BPE vocabularies are written in."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


_BYTE_DECODER = _bytes_to_unicode()


@dataclass
class ModelCard:
    """Everything the gateway knows about the model; built once from InfoResponse."""

    model_id: str
    max_context_len: int
    tokenizer: Tokenizer
    chat_template_source: str
    eos_token_ids: list[int]
    generation_defaults: dict
    special_tokens: dict
    vocab_size: int
    architecture: str = ""
    quantization: str = ""
    num_parameters: int = 0
    config: dict = field(default_factory=dict)   # the checkpoint's config.json ({} when not sent)
    chat_control_tokens: Optional[list] = None   # tokenizer_config.json's list (else inferred from the template)
    # generation_config.json's max_new_tokens: vLLM's default max_tokens (get_diff_sampling_param) where a chat
    # request sends none; None when the file has no positive one
    max_new_tokens: Optional[int] = None
    created: int = field(default_factory=lambda: int(time.time()))
    tool_template_source: str = ""   # tokenizer_config.json's named "tool_use" template, for requests with tools
    model_path: str = ""             # the checkpoint folder as given to the scheduler (vLLM's default served name)
    served_aliases: tuple = ()       # the served names after the first (SPARKINFER_SERVED_MODEL_NAME), set by Engine
    any_model_name: bool = False     # SPARKINFER_SKIP_MODEL_NAME_VALIDATION: any request's model is this one
    force_include_usage: bool = False  # SPARKINFER_FORCE_INCLUDE_USAGE: every stream carries usage, set by Engine
    exclude_tools_when_none: bool = False  # SPARKINFER_EXCLUDE_TOOLS_WHEN_TOOL_CHOICE_NONE, set by Engine
    # SPARKINFER_DEFAULT_CHAT_TEMPLATE_KWARGS: template variables under each request's own, set by Engine
    default_template_kwargs: dict = field(default_factory=dict)

    def __post_init__(self):
        self.template = compile_template(self.chat_template_source) if self.chat_template_source else None
        self.tool_template = compile_template(self.tool_template_source) if self.tool_template_source else None
        self.tokenizer_vocab_size = self.tokenizer.get_vocab_size(with_added_tokens=True)
        spec = orjson.loads(self.tokenizer.to_str())
        self._byte_level = (spec.get("decoder") or {}).get("type") == "ByteLevel"
        # Special tokens are dropped from text, except the markup the reasoning and tool parsers read.
        added = self.tokenizer.get_added_tokens_decoder()
        self._skip_ids = {token_id for token_id, token in added.items()
                          if token.special and token.content not in KEEP_IN_TEXT}
        self._added_texts = frozenset(token.content for token in added.values())
        self._init_protection(added)
        self._grammar_tokenizer = None
        self._fingerprint: Optional[str] = None
        self._grammar_lock = threading.Lock()
        self.max_token_bytes = self._longest_token_bytes(added)
        self._bytes_per_token = _bytes_per_token_bound(spec, self.max_token_bytes, self._byte_level)

    @classmethod
    def from_info(cls, info) -> "ModelCard":
        """The card of a pb.InfoResponse: tokenizer, chat template (from tokenizer_config when Info has none),
        generation and model config."""
        tokenizer = Tokenizer.from_str(info.tokenizer_json.decode("utf-8"))
        gen = orjson.loads(info.generation_config_json) if info.generation_config_json else {}
        tok_cfg = orjson.loads(info.tokenizer_config_json) if info.tokenizer_config_json else {}
        template = info.chat_template or template_from_config(tok_cfg)
        # The named list's tool_use template serves requests with tools, as transformers' get_chat_template(tools=...)
        # picks it (vLLM renders so); a chat_template.jinja the worker read instead replaces the whole list.
        tool_template = template_from_config(tok_cfg, "tool_use") if template == template_from_config(tok_cfg) else ""
        defaults = {key: gen[key] for key in _GENERATION_DEFAULTS if isinstance(gen.get(key), (int, float))}
        specials = {key: special_token_text(tok_cfg.get(key)) for key in _SPECIAL_TOKEN_KEYS}
        return cls(model_id=info.model_id, max_context_len=info.max_context_len, tokenizer=tokenizer,
                   chat_template_source=template, tool_template_source=tool_template,
                   eos_token_ids=list(info.eos_token_ids),
                   generation_defaults=defaults,
                   special_tokens={k: v for k, v in specials.items() if v is not None},
                   vocab_size=info.vocab_size or tokenizer.get_vocab_size(with_added_tokens=True),
                   architecture=info.architecture, quantization=info.quantization,
                   num_parameters=info.num_parameters, config=json_object(info.config_json),
                   chat_control_tokens=string_list(tok_cfg.get("chat_control_tokens")),
                   max_new_tokens=positive_int(gen.get("max_new_tokens")), model_path=info.model_path)

    @property
    def checkpoint_path(self) -> str:
        """The checkpoint folder as the server was given it (MODEL), else the checkpoint's id: vLLM's model card
        root, SGLang's model_path and tokenizer_path, llama-server's /props model_path."""
        return self.model_path or self.model_id

    @property
    def fingerprint(self) -> str:
        """OpenAI's system_fingerprint: names the backend configuration (checkpoint, its quantization, context), so
        that a client pairing it with a seed sees when answers may change; the same on every answer of one model."""
        if self._fingerprint is None:
            spec = f"{self.model_id}|{self.architecture}|{self.quantization}|{self.num_parameters}|" \
                   f"{self.vocab_size}|{self.max_context_len}"
            self._fingerprint = "fp_" + hashlib.sha256(spec.encode("utf-8")).hexdigest()[:10]
        return self._fingerprint

    def _longest_token_bytes(self, added: dict) -> int:
        pieces = self.tokenizer.get_vocab(with_added_tokens=False)
        longest = max((len(self._piece_bytes(piece)) for piece in pieces), default=1)
        return max([longest] + [len(token.content.encode("utf-8")) for token in added.values()])

    def _piece_bytes(self, piece: str) -> bytes:
        if self._byte_level and all(ch in _BYTE_DECODER for ch in piece):
            return bytes(_BYTE_DECODER[ch] for ch in piece)
        return piece.encode("utf-8")

    def min_prompt_tokens(self, text: str) -> int:
        """A lower bound on len(encode(text)) from its UTF-8 size alone, without tokenizing (0: no bound known).

        A byte-level BPE token covers at most max_token_bytes bytes of the normalized text.
        """
        if not self._bytes_per_token or len(text) <= self._bytes_per_token:
            return 0
        size = len(text.encode("utf-8", "surrogatepass")) - 4 * (text.count(MARK_START) + text.count(MARK_END))
        return -(-size // self._bytes_per_token)

    def _init_protection(self, added: dict) -> None:
        self._mark_control = Marker(control_tokens(added, self.chat_control_tokens))
        self._marked_encoder = MarkedEncoder(self.tokenizer)
        self._literal_tokenizer: Optional[Tokenizer] = None
        self._literal_lock = threading.Lock()

    @property
    def protect_text(self) -> Marker:
        """Called on a client's string: it with every control token in it (the special tokens <|im_start|>,
        <|endoftext|>, ...) marked, so that encode() reads it as the characters it is: a message's text must not open
        or end turns. Its seal() readies a text rendered from such strings for encode()."""
        return self._mark_control

    def encode(self, text: str) -> list[int]:
        """Prompt text to ids; special-token strings in the text become their ids (those protect_text marked stay
        plain text, each encoded apart from the text around it, as transformers' encode_marked_chat reads them), no
        BOS is added."""
        # encode_batch releases the GIL (encode does not), so a big prompt in a pool thread leaves the loop free.
        if MARK_START not in text and MARK_END not in text:
            return self.tokenizer.encode_batch([text], add_special_tokens=False)[0].ids
        return self._marked_encoder.encode(text)

    def encode_literal(self, text: str) -> list[int]:
        """`text` to ids with its special-token text as characters, in one run with its neighbours, as llama.cpp
        tokenizes with parse_special false (its /tokenize, a logit_bias text, an infill chunk)."""
        with self._literal_lock:
            if self._literal_tokenizer is None:
                self._literal_tokenizer = Tokenizer.from_str(self.tokenizer.to_str())
                self._literal_tokenizer.encode_special_tokens = True
        return self._literal_tokenizer.encode_batch([text], add_special_tokens=False)[0].ids

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Ids to text. Special tokens are dropped (the reasoning and tool markup kept) unless skip_special_tokens is
        false, which keeps every token, as transformers' decode and vLLM's /detokenize do."""
        kept = [token_id for token_id in token_ids if not skip_special_tokens or token_id not in self._skip_ids]
        return self.tokenizer.decode(kept, skip_special_tokens=False)

    @property
    def byte_level(self) -> bool:
        """Whether the vocabulary is byte-level (GPT-2 / Qwen BPE): decode is the ids' text_bytes read as UTF-8
        (a U+FFFD for each invalid part), so text can be streamed from the bytes (stream.ByteDetokenizer)."""
        return self._byte_level

    @property
    def takes_tools(self) -> bool:
        """Whether the chat template (or the tool_use one) renders tools (Ollama's `tools`, LM Studio's `tool_use`)."""
        return "tools" in (self.chat_template_source or "") + self.tool_template_source

    @property
    def thinks(self) -> bool:
        """Whether the chat template has a thinking mode (Ollama's `thinking` capability, LM Studio's `reasoning`)."""
        source = self.chat_template_source or ""
        return any(marker in source for marker in ("enable_thinking", "<think>", "</think>"))

    def token_pieces(self, token_ids: Sequence[int]) -> list[str]:
        """Each id's vocabulary entry as the tokenizer stores it ("Ġworld" in a byte-level BPE), as transformers'
        convert_ids_to_tokens gives it (vLLM's /tokenize token_strs)."""
        return [self.tokenizer.id_to_token(token_id) or "" for token_id in token_ids]

    def token_text(self, token_id: int) -> str:
        """One token's text for logprobs (special tokens included, broken bytes as U+FFFD)."""
        return self.tokenizer.decode([token_id], skip_special_tokens=False)

    def legacy_token(self, token_id: int) -> str:
        """A token's name in legacy completions logprobs: its text, or OpenAI's "bytes:\\xe2\\x80" form when its bytes
        are not UTF-8 on their own (part of a character): every such token's text is U+FFFD, so as keys of
        top_logprobs they collapsed into one and alternatives were lost."""
        raw = self.token_bytes(token_id)
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return "bytes:" + "".join(f"\\x{byte:02x}" for byte in raw)
        return self.token_text(token_id)

    def token_bytes(self, token_id: int) -> bytes:
        """One token's raw bytes (a byte-level token may hold part of a UTF-8 character)."""
        piece = self.tokenizer.id_to_token(token_id)
        if piece is not None and self._byte_level and all(ch in _BYTE_DECODER for ch in piece):
            return bytes(_BYTE_DECODER[ch] for ch in piece)
        return self.token_text(token_id).encode("utf-8")

    def text_bytes(self, token_id: int, skip_special_tokens: bool = True) -> bytes:
        """The bytes the token adds to decode()'s text (none for a special token decode skips)."""
        return b"" if skip_special_tokens and token_id in self._skip_ids else self.token_bytes(token_id)

    def incomplete_text(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> bool:
        """True when decode(token_ids) may end in a U+FFFD that later tokens turn into a character: the bytes end
        inside one. Only a byte-level vocabulary says so exactly (a byte-fallback or other tokenizer: always true,
        so its trailing U+FFFD waits for the next token or the end)."""
        if not self._byte_level:
            return True
        tail = b""
        for token_id in reversed(token_ids):
            tail = self.text_bytes(token_id, skip_special_tokens) + tail
            if len(tail) >= 4:
                break
        return utf8_incomplete_tail(tail)

    def token_id(self, text: str) -> Optional[int]:
        """The id of a token's text in the vocabulary (added tokens too); None when no token is that text."""
        return self.tokenizer.token_to_id(text)

    def is_added_token(self, text: str) -> bool:
        """True when `text` is one added token (llguidance grammars then name it as a special token)."""
        return text in self._added_texts

    @property
    def added_token_texts(self) -> frozenset:
        """The texts of the tokenizer's added tokens (<tool_call>, <|im_end|>, ...)."""
        return self._added_texts

    def grammar_tokenizer(self):
        """llguidance's view of the tokenizer (built on the first constrained request) to check grammars: the worker's,
        forced text tokenized without the added tokens (proto/grammar_tokenizer.py), as the worker masks it."""
        with self._grammar_lock:
            return self._build_grammar_tokenizer()

    def _build_grammar_tokenizer(self):
        if self._grammar_tokenizer is None:
            from proto.grammar_tokenizer import grammar_tokenizer
            text, eos = self.tokenizer.to_str(), list(self.eos_token_ids) or None
            # Masks cover the LM head; a tokenizer larger than the head keeps its own size.
            n_vocab = max(self.vocab_size, self.tokenizer_vocab_size)
            self._grammar_tokenizer = grammar_tokenizer(text, eos, n_vocab=n_vocab)
        return self._grammar_tokenizer


def _bytes_per_token_bound(spec: dict, max_token_bytes: int, byte_level: bool) -> int:
    """Most UTF-8 bytes of input text one token can stand for (0 when the tokenizer gives no such bound)."""
    normalizer = spec.get("normalizer")
    kinds = [None] if normalizer is None else [n.get("type") for n in normalizer.get("normalizers", [normalizer])]
    if not byte_level or any(kind not in _NORMALIZER_SHRINK for kind in kinds):
        return 0
    shrink = 1
    for kind in kinds:
        shrink *= _NORMALIZER_SHRINK[kind]
    return max_token_bytes * shrink
