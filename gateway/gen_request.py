"""Gateway process: the internal request every HTTP API translates into (GenRequest) and what comes back."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from gateway.text_parts import TextParts


@dataclass
class Sampling:
    """Resolved sampling knobs (request values over generation_config defaults)."""
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    typical_p: float = 1.0   # locally typical sampling mass (Ollama's typical_p); 1 = off
    seed: Optional[int] = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    repetition_window: int = 0   # repetition_penalty covers the last N prompt+output tokens (0 = all of them)
    logit_bias: dict = field(default_factory=dict)   # token id -> bias
    allowed_token_ids: list = field(default_factory=list)   # vLLM's: only these may be sampled ([] = every token)
    bad_words: list = field(default_factory=list)   # vLLM's bad_words, each a token id list (openai_sampling)
    # llama.cpp's `samplers` (gateway.llama_cpp_samplers): the names it listed, and the filters among them in order
    # ("temperature", "top_k", "top_p", "min_p", "typ_p"); None: not sent, the chain's own order.
    min_keep: int = 0        # llama.cpp's: top_p, min_p and typical_p keep at least this many tokens
    sampler_names: Optional[list] = None
    filter_order: Optional[list] = None
    min_tokens: int = 0      # generated tokens before eos / stop ids / stop strings may end it (0 = off)
    # Whose order the filters run in, and where frequency/presence count (worker/sampling_chain.py): "vllm" (the
    # /v1 routes), "ollama" (/api) or "llama.cpp" (/completion).
    chain: str = "vllm"
    # llama.cpp's post_sampling_probs: logprobs of the distribution drawn from (after the chain), not the raw one.
    post_sampling: bool = False
    # llama.cpp's XTC: with this chance a step removes the tokens at or above the threshold but the least likely.
    xtc_probability: float = 0.0
    xtc_threshold: float = 0.1
    top_n_sigma: float = -1.0   # llama.cpp's top-n-sigma: 0 or less is off
    dynatemp_range: float = 0.0     # llama.cpp's dynamic temperature: 0 is off
    dynatemp_exponent: float = 1.0
    mirostat: int = 0               # llama.cpp's mirostat version (0 off) and its target surprise and learning rate
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    # llama.cpp's DRY (gateway/dry_sampling.py): off at multiplier 0; its breakers as strings and as token sequences.
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = -1
    dry_sequence_breakers: list = field(default_factory=lambda: ["\n", ":", "\"", "*"])
    dry_breaker_ids: list = field(default_factory=list)


@dataclass
class GenRequest:
    """One generation as the APIs ask for it: prompt ids in, n choices of text out."""
    req_id: str
    prompt_ids: list
    max_tokens: int                      # generated tokens at most (>= 1)
    sampling: Sampling = field(default_factory=Sampling)
    stop: list = field(default_factory=list)           # stop strings (never returned)
    stop_token_ids: list = field(default_factory=list)  # extra stop ids besides the model's eos
    ignore_eos: bool = False
    include_stop: bool = False           # a matched stop string is kept at the end of the output
    # vLLM's min_tokens holds stop strings off too (its detokenizer checks them once past min_tokens); SGLang's
    # min_new_tokens masks only the eos / stop ids (Req.check_finished matches stop strings from the first token).
    min_tokens_hold_stop: bool = True
    # Ollama's runner matches stop strings over all it generates, the thinking too (the thinking is split off after);
    # vLLM's, false, only over the answer.
    stop_in_reasoning: bool = False
    skip_special_tokens: bool = True     # vLLM's: false keeps special tokens (<|im_start|>, ...) in the text
    # vLLM (/v1): the eos / stop_token_ids token that ended a choice is part of its output, so with logprobs it has its
    # entry (its text only with include_stop, a special token's only with skip_special_tokens false as well).
    stop_token_logprob: bool = False
    n: int = 1
    num_logprobs: Optional[int] = None   # None: no logprobs; k >= 0: sampled token + k alternatives
    # None: no prompt logprobs; k >= 0: each prompt token's logprob and rank + the k most likely tokens there
    num_prompt_logprobs: Optional[int] = None
    split_reasoning: bool = False        # separate <think>...</think> into Delta.reasoning
    thinking_open: bool = False          # the prompt itself ended with an opened <think>
    hide_reasoning: bool = False         # the reasoning is left out of the answer: so are its tokens' logprobs
    extra_prompt_ids: list = field(default_factory=list)  # more prompts (legacy completions batch)
    extra_max_tokens: list = field(default_factory=list)  # their limits when they differ from max_tokens (the room)
    constraint: Optional[object] = None  # gateway.structured.Constraint the output must follow (None = free)
    keep_alive: Optional[float] = None   # Ollama's keep_alive, seconds (inf: forever); None: the 5m default (/api/ps)
    num_ctx: Optional[int] = None        # Ollama's options.num_ctx, tokens (/api/ps); None: the model's window
    cache_salt: str = ""                 # vLLM's: prefix-cache entries are shared only within one salt ("" = none)
    priority: int = 0                    # vLLM's: lower values are scheduled first (int32 on the wire)
    # vLLM's (max_repetition_pattern_size, min_repetition_pattern_size, repetition_min_count): the choice ends with
    # finish_reason "repetition" on a repeated token pattern (gateway/repetition_stop.py); all 0 = off.
    repetition_stop: tuple = (0, 0, 0)
    # llama.cpp's t_max_predict_ms, in seconds: past it (from a choice's first token) the choice ends "length" after
    # its next newline; None: no time limit.
    max_predict_s: Optional[float] = None
    # llama.cpp's n_indent: a line after the first indented less than this ends the output (gateway.indent_limit).
    min_indent: int = 0
    # The ids a cancel names this request by (vLLM's /v1/requests/{id}/cancel, SGLang's /abort_request): id -> the
    # choices it ends (None: all of them); empty: it cannot be cancelled by id.
    cancel_ids: dict = field(default_factory=dict)

    @property
    def all_prompt_ids(self) -> list:
        """Every prompt of the request: prompt_ids, then extra_prompt_ids (a batch of prompts)."""
        return [self.prompt_ids] + list(self.extra_prompt_ids)

    def max_tokens_of(self, prompt_index: int) -> int:
        """The generation limit of prompt prompt_index (0: the first prompt's max_tokens)."""
        return self.max_tokens if prompt_index == 0 or not self.extra_max_tokens \
            else self.extra_max_tokens[prompt_index - 1]

    @property
    def num_choices(self) -> int:
        """n choices per prompt; choice index = prompt_index * n + i."""
        return self.n * (1 + len(self.extra_prompt_ids))


@dataclass
class ChoiceResult:
    index: int
    content: str = ""
    reasoning: str = ""
    logprobs: list = field(default_factory=list)
    finish_reason: Optional[str] = None
    stop_reason: Optional[Union[str, int]] = None   # vLLM's: matched stop string or stop_token_ids id
    prompt_logprobs: Optional[list] = None  # TokenLogprob (rank set) of prompt positions 1.. when asked for
    token_ids: list = field(default_factory=list)   # generated ids (the eos / stop token that ended it too)
    num_reasoning_tokens: int = 0                   # of those, the thinking (Delta.num_reasoning_tokens)

    def absorb(self, delta) -> None:
        """Adds one gateway.pipeline.Delta of this choice (the non-streamed answer is the sum of its Deltas)."""
        self._content.add(delta.content)
        self._reasoning.add(delta.reasoning)
        self.logprobs.extend(delta.logprobs)
        self.token_ids.extend(delta.token_ids)
        self.num_reasoning_tokens = delta.num_reasoning_tokens
        if delta.prompt_logprobs is not None:
            self.prompt_logprobs = delta.prompt_logprobs
        if delta.finish_reason:
            self.finish_reason, self.stop_reason = delta.finish_reason, delta.stop_reason


def _text_field(name: str) -> property:
    """ChoiceResult's content or reasoning, a str as its field says, kept as TextParts (absorb adds each Delta's
    piece; reading it joins them): installed after @dataclass, whose __init__ and replace() set and read it."""
    return property(lambda result: str(getattr(result, name)),
                    lambda result, text: setattr(result, name, TextParts(text)))


ChoiceResult.content = _text_field("_content")
ChoiceResult.reasoning = _text_field("_reasoning")


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    # Per prompt of a multi-prompt request: (prompt_tokens, cached_tokens), as Generation.usage and sent_usage set it.
    per_prompt: list = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        """prompt_tokens + completion_tokens."""
        return self.prompt_tokens + self.completion_tokens


@dataclass
class ChoiceProgress:
    """One running choice as a seat holds it (Generation.running_choices): llama.cpp's GET /slots states a busy slot's
    task by these counts (tools/server server-context.cpp server_slot::to_json)."""
    task_id: int          # the gateway's number of this choice, unique for the process's life
    req: GenRequest
    index: int            # the choice's index in its request
    prompt_tokens: int
    cached_tokens: int    # of those, prefix-cache hits (known once the scheduler answered for the prompt)
    prefilled: bool       # the scheduler answered for it: its prompt is read
    decoded: int          # tokens generated so far
    new_line: bool        # a newline was in its text so far
    done: bool = False    # it ended (GET /slots then states it as the task its seat ran last)

    @property
    def limit(self) -> int:
        """The choice's generation limit (its prompt's max_tokens)."""
        return self.req.max_tokens_of(self.index // self.req.n)
