"""Bench helper (bench/soak.py): checks one whole answer in its API's shape, streamed or not. `problems(case, status,
data)` lists what is wrong with it ([] when nothing is): every streamed frame valid JSON, the stream's end marker
([DONE], message_stop, response.completed / .incomplete, done: true, stop: true), the finish reason of every choice,
and the usage against the output limit and the logprobs returned (one entry per generated token)."""
from __future__ import annotations

import json

from bench.soak_cases import Case


def sse_events(data: bytes) -> list:
    """(event name or None, data text) of each SSE event; comments (keep-alives) skipped."""
    events = []
    for block in data.decode().replace("\r\n", "\n").split("\n\n"):
        name, lines = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                lines.append(line[5:].lstrip(" "))
        if lines:
            events.append((name, "\n".join(lines)))
    return events


def sse_json(data: bytes, done_marker: bool) -> list:
    """The JSON frames of an SSE stream; raises ValueError on a bad frame, a missing or early [DONE]."""
    texts = [text for _, text in sse_events(data)]
    if done_marker:
        if not texts or texts[-1] != "[DONE]" or texts.count("[DONE]") != 1:
            raise ValueError("no single final [DONE]")
        texts = texts[:-1]
    return [json.loads(text) for text in texts]


def usage_problems(case: Case, generated: int, lengths: list, reasons: list, length_word: str,
                   prompt: int = 0) -> list:
    """Usage against the limit: at most n * max_tokens tokens; a choice cut by its limit has exactly max_tokens, or
    fewer where they filled the context after its `prompt` tokens (llama-server, SGLang and Ollama cap the output)."""
    out = []
    room = min(case.max_tokens, case.max_model_len - prompt) if prompt and case.max_model_len else case.max_tokens
    if generated > case.n * case.max_tokens:
        out.append(f"{generated} tokens past {case.n} x {case.max_tokens}")
    if lengths and sum(lengths) != generated:
        out.append(f"per-choice tokens {lengths} do not sum to usage {generated}")
    for count, reason in zip(lengths, reasons):
        if reason == length_word and count not in (case.max_tokens, room):
            out.append(f"finish {reason} after {count} of {case.max_tokens} tokens")
    return out


def json_problem(text: str) -> list:
    try:
        obj = json.loads(text)
    except ValueError:
        return [f"structured output is no JSON: {text[:80]!r}"]
    return [] if isinstance(obj, dict) and {"name", "age"} <= obj.keys() else [f"schema not met: {text[:80]!r}"]


def openai_problems(case: Case, data: bytes) -> list:
    """/v1/chat/completions and /v1/completions, streamed (chunks merged per index) or not."""
    chat = case.api == "chat"
    if case.stream:
        frames = sse_json(data, True)
        usage = frames[-1].get("usage") if frames else None
        choices = {}
        for frame in frames:
            if frame.get("object") != ("chat.completion.chunk" if chat else "text_completion"):
                return [f"frame object {frame.get('object')!r}"]
            for c in frame["choices"]:
                merged = choices.setdefault(c["index"], {"text": "", "reasons": [], "lp": 0, "tools": []})
                delta = c.get("delta") or {}
                merged["text"] += (delta.get("content") or "") if chat else c.get("text", "")
                merged["tools"] += delta.get("tool_calls") or []
                if c.get("finish_reason"):
                    merged["reasons"].append(c["finish_reason"])
                lp = c.get("logprobs")
                merged["lp"] += len(lp.get("content") or []) if chat and lp else len(lp["tokens"]) if lp else 0
        out = [f"choice {i} finish reasons {m['reasons']}" for i, m in choices.items() if len(m["reasons"]) != 1]
        if sorted(choices) != list(range(case.n)):
            out.append(f"choices {sorted(choices)} for n {case.n}")
        if out or usage is None:
            return out or ["no usage chunk"]
        merged = [choices[i] for i in sorted(choices)]
        reasons = [m["reasons"][0] for m in merged]
        texts, lps = [m["text"] for m in merged], [m["lp"] for m in merged]
    else:
        body = json.loads(data)
        if body.get("object") != ("chat.completion" if chat else "text_completion"):
            return [f"object {body.get('object')!r}"]
        usage, choices = body["usage"], sorted(body["choices"], key=lambda c: c["index"])
        if [c["index"] for c in choices] != list(range(case.n)):
            return [f"choice indexes {[c['index'] for c in choices]}"]
        reasons = [c["finish_reason"] for c in choices]
        texts = [(c["message"].get("content") or "") if chat else c["text"] for c in choices]
        lps = [len((c.get("logprobs") or {}).get("content") or []) if chat else
               len((c.get("logprobs") or {}).get("tokens") or []) for c in choices]
    out = [f"finish_reason {r!r}" for r in reasons if r not in ("stop", "length", "tool_calls")]
    if usage["total_tokens"] != usage["prompt_tokens"] + usage["completion_tokens"]:
        out.append(f"usage does not add up: {usage}")
    counted = lps if "logprobs" in case.checks and "stop" not in case.checks else []
    out += usage_problems(case, usage["completion_tokens"], counted, reasons, "length")
    if "json" in case.checks:
        out += [p for t, r in zip(texts, reasons) if r == "stop" for p in json_problem(t)]
    return out


def anthropic_problems(case: Case, data: bytes) -> list:
    if not case.stream:
        body = json.loads(data)
        if body.get("type") != "message" or body.get("role") != "assistant":
            return [f"not a message: {str(body)[:120]}"]
        reason, generated = body["stop_reason"], body["usage"]["output_tokens"]
    else:
        events = [(name, json.loads(text)) for name, text in sse_events(data)]
        names = [name for name, _ in events]
        if not names or names[0] != "message_start" or names[-1] != "message_stop" or names.count("message_stop") != 1:
            return [f"events {names[:3]}...{names[-3:]}"]
        if any(name != frame.get("type") for name, frame in events):
            return ["an event name differs from its data's type"]
        deltas = [frame for name, frame in events if name == "message_delta"]
        if len(deltas) != 1:
            return [f"{len(deltas)} message_delta events"]
        reason, generated = deltas[0]["delta"]["stop_reason"], deltas[0]["usage"]["output_tokens"]
    out = [] if reason in ("end_turn", "max_tokens", "stop_sequence", "tool_use") else [f"stop_reason {reason!r}"]
    return out + usage_problems(case, generated, [generated], [reason], "max_tokens")


def responses_problems(case: Case, data: bytes) -> list:
    if case.stream:
        frames = [json.loads(text) for _, text in sse_events(data)]
        numbers = [f.get("sequence_number") for f in frames]
        if numbers != list(range(len(frames))):
            return ["sequence numbers are not 0, 1, 2, ..."]
        if not frames or frames[-1]["type"] not in ("response.completed", "response.incomplete"):
            return [f"last event {frames[-1]['type'] if frames else None}"]
        body = frames[-1]["response"]
    else:
        body = json.loads(data)
    if body.get("object") != "response" or body["status"] not in ("completed", "incomplete"):
        return [f"response status {body.get('status')!r}"]
    limited = body["status"] == "incomplete"
    out = usage_problems(case, body["usage"]["output_tokens"], [body["usage"]["output_tokens"]],
                         ["length" if limited else "stop"], "length")
    if "json" in case.checks and not limited:
        texts = [part["text"] for item in body["output"] if item["type"] == "message" for part in item["content"]]
        out += json_problem("".join(texts))
    return out


def ollama_problems(case: Case, data: bytes) -> list:
    lines = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    if not lines or not lines[-1].get("done") or any(line.get("done") for line in lines[:-1]):
        return ["no single final done: true"]
    last = lines[-1]
    reason, generated = last.get("done_reason"), last["eval_count"]
    out = [] if reason in ("stop", "length") else [f"done_reason {reason!r}"]
    if "logprobs" in case.checks:
        # Ollama's runner counts the end-of-generation token in eval_count but sends no piece, so no logprob, for it
        # (runner/ollamarunner/runner.go: seq.numPredicted++ before its EOG check, the logprobs after it)
        num_logprobs = sum(len(line.get("logprobs") or []) for line in lines)
        if num_logprobs not in (generated, generated - (reason == "stop")):
            out.append(f"{num_logprobs} logprobs for eval_count {generated} ({reason})")
    out += usage_problems(case, generated, [generated], [reason], "length", last["prompt_eval_count"])
    if "json" in case.checks and reason == "stop":
        out += json_problem("".join((line.get("message") or {}).get("content", "") for line in lines))
    return out


def llama_problems(case: Case, data: bytes) -> list:
    frames = sse_json(data, False) if case.stream else [json.loads(data)]
    if not frames or not frames[-1].get("stop") or any(f.get("stop") for f in frames[:-1]):
        return ["no single final stop: true"]
    last = frames[-1]
    reason, generated = last["stop_type"], last["tokens_predicted"]
    out = [] if reason in ("eos", "limit", "word") else [f"stop_type {reason!r}"]
    counted = []
    if "logprobs" in case.checks and "stop" not in case.checks:
        counted = [sum(len(f.get("completion_probabilities") or []) for f in frames)]
    return out + usage_problems(case, generated, counted or [generated], [reason], "limit", last["tokens_evaluated"])


def sglang_problems(case: Case, data: bytes) -> list:
    frames = sse_json(data, True) if case.stream else [json.loads(data)]
    if not frames or any(f["meta_info"]["finish_reason"] for f in frames[:-1]):
        return ["a finish_reason before the last frame"]
    meta = frames[-1]["meta_info"]
    reason = (meta["finish_reason"] or {}).get("type")
    out = [] if reason in ("stop", "length") else [f"finish_reason {meta['finish_reason']!r}"]
    if len(frames[-1]["output_ids"]) != meta["completion_tokens"]:
        out.append(f"{len(frames[-1]['output_ids'])} output_ids, completion_tokens {meta['completion_tokens']}")
    return out + usage_problems(case, meta["completion_tokens"], [meta["completion_tokens"]], [reason], "length",
                                meta["prompt_tokens"])


CHECKERS = {"chat": openai_problems, "completions": openai_problems, "messages": anthropic_problems,
            "responses": responses_problems, "ollama_chat": ollama_problems, "ollama_generate": ollama_problems,
            "llama_completion": llama_problems, "sglang_generate": sglang_problems}


def error_problems(case: Case, status: int, data: bytes) -> list:
    """A refused request: a 4xx whose JSON body names an error (every API's error shape has an `error` key)."""
    if not 400 <= status < 500:
        return [f"status {status} for a bad request"]
    try:
        body = json.loads(data)
    except ValueError:
        return [f"error body is no JSON: {data[:80]!r}"]
    return [] if isinstance(body, dict) and "error" in body else [f"error body without error: {data[:120]!r}"]


def problems(case: Case, status: int, data: bytes) -> list:
    """What is wrong with a whole answer ([] when nothing)."""
    if case.expect_error or ("long" in case.checks and status == 400):
        return error_problems(case, status, data)
    if status != 200:
        return [f"status {status}: {data[:200]!r}"]
    try:
        return CHECKERS[case.api](case, data)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        return [f"unparsable answer ({exc!r}): {data[:160]!r}...{data[-160:]!r}"]
