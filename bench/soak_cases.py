"""Bench helper (the client side of bench/soak.py): seeded random requests over every generation API, each a Case
with what its client does (read it all, cut it mid-prefill or mid-stream, time out) and what it must get back."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

APIS = ("chat", "completions", "messages", "responses", "ollama_chat", "ollama_generate", "llama_completion",
        "sglang_generate")
PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions", "messages": "/v1/messages",
         "responses": "/v1/responses", "ollama_chat": "/api/chat", "ollama_generate": "/api/generate",
         "llama_completion": "/completion", "sglang_generate": "/generate"}
# Shared system prompts (repeated prefixes: prefix-cache hits, and evictions once more of them than cache entries).
PREFIXES = [f"You are assistant number {i}. " + "Answer briefly and well. " * (6 + 3 * i) for i in range(6)]
WORDS = "the quick brown fox jumps over a lazy dog while seven tired wizards quietly hum old songs".split()
SCHEMA = {"type": "object", "required": ["name", "age"], "additionalProperties": False,
          "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"}}}
TOOL = {"name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string",
                                                                                       "maxLength": 10}}}}


@dataclass
class Case:
    """One request: api (a key of PATHS), its JSON body (or raw bytes for a malformed one), whether it streams, how
    its client ends it (None: reads it all; "prefill": closes the socket before the first byte; "stream": closes
    it after a few frames; "timeout": gives up after a short deadline), and what its answer must hold."""
    api: str
    body: dict | bytes
    stream: bool = False
    cut: str | None = None
    expect_error: bool = False
    max_tokens: int = 0
    n: int = 1
    checks: set = field(default_factory=set)  # "json", "tools", "logprobs" (counted), "stop", "long"
    max_model_len: int = 0  # the context: an output may end short of max_tokens where the prompt leaves less room

    @property
    def path(self) -> str:
        return PATHS[self.api]


def words(rng: random.Random, num: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(num))


class CaseMaker:
    """Draws Cases from one seeded generator; `max_model_len` is the stack's context (long prompts end near it)."""

    def __init__(self, seed: int, max_model_len: int):
        self.rng, self.max_model_len = random.Random(seed), max_model_len

    def make(self) -> Case:
        rng = self.rng
        roll = rng.random()
        if roll < 0.06:
            return self.bad()
        api = rng.choice(APIS)
        case = Case(api, {}, stream=rng.random() < 0.5, max_tokens=rng.choice([1, 1, 4, 8, 16, 24, 32]),
                    max_model_len=self.max_model_len)
        if roll < 0.14:
            case.cut = "prefill"
        elif roll < 0.22 and case.stream:
            case.cut = "stream"
        elif roll < 0.26:
            case.cut = "timeout"
        system = rng.choice(PREFIXES) if rng.random() < 0.4 else None
        long_prompt = rng.random() < 0.06
        text = words(rng, rng.randint(3, 40))
        if long_prompt:
            # about 2.6 tokens a word with the tiny tokenizer: most of the context, or past it (a 400 then)
            system, text = None, words(rng, int((self.max_model_len - case.max_tokens) / rng.uniform(2.4, 2.9)))
            case.checks.add("long")
        getattr(self, "body_" + api)(case, system, text)
        return case

    def bad(self) -> Case:
        """A request its server must refuse with a 4xx in its API's error shape."""
        rng = self.rng
        api = rng.choice(APIS)
        # llama-server reads a negative n_predict as "no limit" and Ollama truncates a long prompt: no errors there
        kinds = ["json"] + (["negative"] if api != "llama_completion" else []) + (
            ["too_long"] if api in ("chat", "completions", "messages", "responses") else [])
        kind = rng.choice(kinds)
        if kind == "json":
            return Case(api, b'{"model": "tiny", "messages": [', expect_error=True)
        case = Case(api, {}, max_tokens=4, expect_error=True, stream=rng.random() < 0.5)
        text = words(rng, 5) if kind == "negative" else words(rng, self.max_model_len * 2)
        getattr(self, "body_" + api)(case, None, text)
        body = case.body
        if kind == "negative":
            for key in ("max_tokens", "max_output_tokens", "n_predict"):
                if key in body:
                    body[key] = -5
            if "options" in body:
                body["options"]["temperature"] = "hot"
            if "sampling_params" in body:
                body["sampling_params"]["temperature"] = -1.0
        return case

    def _sampling(self, case: Case, body: dict) -> None:
        rng = self.rng
        if rng.random() < 0.5:
            body["temperature"] = 0
        else:
            body["seed"] = rng.randint(0, 1 << 20)
        if rng.random() < 0.15:
            body["stop"] = [rng.choice(WORDS), "\n"]
            case.checks.add("stop")

    def _messages(self, system: str | None, text: str) -> list:
        head = [{"role": "system", "content": system}] if system else []
        return head + [{"role": "user", "content": text}]

    def body_chat(self, case: Case, system, text) -> None:
        rng = self.rng
        body = {"model": "tiny", "messages": self._messages(system, text), "max_tokens": case.max_tokens,
                "stream": case.stream}
        if case.stream:
            body["stream_options"] = {"include_usage": True}
        self._sampling(case, body)
        case.n = body["n"] = rng.choice([1, 1, 1, 2, 3])
        roll = rng.random()
        if roll < 0.15 and 16 <= case.max_tokens and "long" not in case.checks:
            body["max_tokens"] = case.max_tokens = 40
            body["chat_template_kwargs"] = {"enable_thinking": False}
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}
            case.checks.add("json")
        elif roll < 0.3 and 16 <= case.max_tokens and "long" not in case.checks:
            # the tools' preamble is long: no shared system prompt beside it
            body["max_tokens"], body["messages"] = 40, self._messages(None, text)
            case.max_tokens = 40
            body["tools"] = [{"type": "function", "function": TOOL}]
            body["tool_choice"] = "required"
            case.checks.add("tools")
        elif roll < 0.5:
            body["logprobs"], body["top_logprobs"] = True, rng.choice([0, 2])
            body["chat_template_kwargs"] = {"enable_thinking": False}
            case.checks.add("logprobs")
        case.body = body

    def body_completions(self, case: Case, system, text) -> None:
        rng = self.rng
        prompt = (system or "") + text
        if rng.random() < 0.3 and not case.expect_error:
            # token ids: the prompt's exact length, up to the last one the context takes
            num = self.max_model_len - case.max_tokens if rng.random() < 0.3 else rng.randint(1, 60)
            prompt = [rng.randint(10, 900) for _ in range(num)]
        body = {"model": "tiny", "prompt": prompt, "max_tokens": case.max_tokens, "stream": case.stream}
        if case.stream:
            body["stream_options"] = {"include_usage": True}
        self._sampling(case, body)
        case.n = body["n"] = rng.choice([1, 1, 2, 4])
        if rng.random() < 0.4:
            body["logprobs"] = rng.choice([0, 1, 3])
            case.checks.add("logprobs")
        case.body = body

    def body_messages(self, case: Case, system, text) -> None:
        rng = self.rng
        body = {"model": "tiny", "messages": [{"role": "user", "content": text}], "max_tokens": case.max_tokens,
                "stream": case.stream}
        if system:
            body["system"] = system
        if rng.random() < 0.15:
            body["stop_sequences"] = [rng.choice(WORDS)]
        if rng.random() < 0.2 and 16 <= case.max_tokens and "long" not in case.checks:
            body["max_tokens"] = case.max_tokens = 40
            body.pop("system", None)
            body["tools"] = [{"name": TOOL["name"], "description": TOOL["description"],
                              "input_schema": TOOL["parameters"]}]
            body["tool_choice"] = {"type": "any"}
            case.checks.add("tools")
        case.body = body

    def body_responses(self, case: Case, system, text) -> None:
        rng = self.rng
        case.max_tokens = max(case.max_tokens, 16)
        body = {"model": "tiny", "input": text, "max_output_tokens": case.max_tokens, "stream": case.stream}
        if system:
            body["instructions"] = system
        if rng.random() < 0.2 and "long" not in case.checks:
            body["max_output_tokens"] = case.max_tokens = 40
            body["text"] = {"format": {"type": "json_schema", "name": "p", "schema": SCHEMA, "strict": True}}
            case.checks.add("json")
        case.body = body

    def body_ollama_chat(self, case: Case, system, text) -> None:
        rng = self.rng
        body = {"model": "tiny", "messages": self._messages(system, text), "stream": case.stream,
                "options": {"num_predict": case.max_tokens, "seed": rng.randint(0, 99)}}
        if rng.random() < 0.2 and 16 <= case.max_tokens and "long" not in case.checks:
            body["options"]["num_predict"] = case.max_tokens = 40
            body["format"], body["think"] = SCHEMA, False
            case.checks.add("json")
        if rng.random() < 0.2:
            body["logprobs"] = True
            case.checks.add("logprobs")
        case.body = body

    def body_ollama_generate(self, case: Case, system, text) -> None:
        body = {"model": "tiny", "prompt": text, "stream": case.stream,
                "options": {"num_predict": case.max_tokens, "temperature": 0}}
        if system:
            body["system"] = system
        if self.rng.random() < 0.3:
            body["logprobs"] = True
            case.checks.add("logprobs")
        case.body = body

    def body_llama_completion(self, case: Case, system, text) -> None:
        rng = self.rng
        body = {"prompt": (system or "") + text, "n_predict": case.max_tokens, "stream": case.stream,
                "cache_prompt": True}
        if rng.random() < 0.3:
            body["n_probs"] = 2
            case.checks.add("logprobs")
        if rng.random() < 0.15:
            body["stop"] = [rng.choice(WORDS)]
            case.checks.add("stop")
        case.body = body

    def body_sglang_generate(self, case: Case, system, text) -> None:
        body = {"text": (system or "") + text, "stream": case.stream,
                "sampling_params": {"max_new_tokens": case.max_tokens, "temperature": 0}}
        case.body = body
