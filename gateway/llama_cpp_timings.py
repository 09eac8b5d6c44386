"""Gateway process: llama.cpp's `timings` object (server-task.cpp result_timings::to_json) for its own routes and the
OpenAI-compatible ones, where llama-server adds it beside `usage`."""
from __future__ import annotations

import time
from typing import Optional

from gateway.gen_request import Usage


def _ms_rate(num: int, seconds: float) -> tuple[float, float, float]:
    """(ms, ms per token, tokens per second) of num tokens over seconds, as llama.cpp's timings give them."""
    ms = seconds * 1e3
    return ms, (ms / num if num else 0.0), (num / seconds if num and seconds > 0 else 0.0)


def llama_timings(gen, received: float, prompt_n: int, cached: int, predicted_n: int) -> dict:
    """One choice's timings so far: prompt_n counts the prompt tokens read (the cached ones are cache_n), predicted
    the tokens generated since the first. gen: the Generation (None: nothing generated yet); received: when the
    request came, time.monotonic()."""
    now = time.monotonic()
    first = gen.first_token_at if gen is not None and gen.first_token_at else now
    # llama.cpp times the prompt from when its slot starts on it: the time queued for a seat is not prompt time.
    queued = gen.queue_time if gen is not None else 0.0
    p_ms, p_tok_ms, p_rate = _ms_rate(prompt_n - cached, max(first - received - queued, 0.0))
    g_ms, g_tok_ms, g_rate = _ms_rate(predicted_n, now - first)
    return {"cache_n": cached, "prompt_n": prompt_n - cached, "prompt_ms": p_ms, "prompt_per_token_ms": p_tok_ms,
            "prompt_per_second": p_rate, "predicted_n": predicted_n, "predicted_ms": g_ms,
            "predicted_per_token_ms": g_tok_ms, "predicted_per_second": g_rate}


def oai_timings(gen, usage: Optional[Usage], predicted_n: Optional[int] = None) -> Optional[dict]:
    """The `timings` llama-server puts on its /v1 chat and completions answers (to_json_oaicompat_chat and
    to_json_oaicompat: the whole answer; the stream's last chunk, the usage chunk when one is asked for), which clients
    read for tokens per second (AnythingLLM's Generic OpenAI provider, llama-swap). None without a Generation (a route
    that is not llama.cpp's) or for more than one choice (llama.cpp answers each choice as a task of its own)."""
    if gen is None or usage is None or gen.req.num_choices != 1:
        return None
    generated = usage.completion_tokens if predicted_n is None else predicted_n
    return llama_timings(gen, gen.started_at, usage.prompt_tokens, usage.cached_tokens, generated)


def prompt_progress(gen, usage: Usage, prompt: int = 0) -> dict:
    """llama-server's prompt_progress (result_prompt_progress::to_json: total, cache, processed, time_ms) of a /v1
    stream's prompt-th prompt with return_progress: here once the prompt is read, as the scheduler reports no progress
    within it (llama.cpp's web UI shows it as the prompt's processing)."""
    total, cached = (usage.per_prompt[prompt] if len(usage.per_prompt) > prompt
                     else (usage.prompt_tokens, usage.cached_tokens))
    time_ms = llama_timings(gen, gen.started_at, total, cached, 0)["prompt_ms"]
    return {"total": total, "cache": cached, "processed": total, "time_ms": time_ms}


def chunk_extras(shaper, choice: dict, usage: Usage, num_tokens: int, include_usage: bool) -> Optional[dict]:
    """llama-server's extras on one /v1 chat chunk (server-task.cpp to_json_oaicompat_chat, partial and final): the
    role chunk's prompt_progress with return_progress; the timings so far on each chunk of text or calls with
    timings_per_token; the timings on the finish chunk, the stream's last unless a usage chunk follows. shaper: the
    ChatShaper, whose route set timed, timings_per_token and return_progress (none on routes not llama.cpp's)."""
    finish = choice.get("finish_reason") is not None
    role = "role" in choice["delta"]
    if role and shaper.return_progress and shaper.timed is not None:
        return {"prompt_progress": prompt_progress(shaper.timed, usage)}
    if shaper.timings_per_token and not finish and not role or finish and not include_usage:
        timings = oai_timings(shaper.timed, usage, num_tokens)
        return None if timings is None else {"timings": timings}
    return None
