"""Bench (its own process, plus scheduler, worker and gateway processes): time to first token of a chat's turn 2
with the prefix cache on and off, on the tiny model (CPU by default).

Each conversation: a ~N-token system prompt (distinct per conversation) + a user turn -> a greedy answer (turn 1),
then the same history + the answer + a second user turn -> 1 token (turn 2). TTFT is the wall time of the
non-streamed /v1/chat/completions call with max_tokens 1 (prefill + one sampled token + the HTTP round trip).
Prints one table row per mode (median over conversations, ms) and the cached tokens the gateway reported.
Run: python -m bench.prefix_cache_ttft [--system-tokens 1500] [--conversations 5]
"""
import argparse
import json
import statistics
import time
import urllib.request

from tests.e2e.stack import EngineStack, running_gateway

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
         "romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


def system_prompt(base: str, seed: int, num_tokens: int) -> str:
    """Text of about `num_tokens` tokens (measured with /v1/tokenize), distinct per seed."""
    words = [f"{WORDS[(seed * 7 + i * 3) % len(WORDS)]}{(seed + i) % 10}" for i in range(num_tokens)]
    text = " ".join(words)
    count = post(f"{base}/v1/tokenize", {"prompt": text})["count"]
    return " ".join(words[:max(1, len(words) * num_tokens // count)])


def chat(base: str, messages: list, max_tokens: int) -> tuple:
    """(reply dict, seconds) of one greedy, non-streamed chat completion."""
    body = {"model": "tiny", "messages": messages, "max_tokens": max_tokens, "temperature": 0,
            "enable_thinking": False}
    start = time.perf_counter()
    reply = post(f"{base}/v1/chat/completions", body)
    return reply, time.perf_counter() - start


def conversation(base: str, seed: int, num_tokens: int) -> dict:
    """Turn 1 then turn 2 of one conversation; returns seconds of each, turn 2's prompt and cached tokens."""
    messages = [{"role": "system", "content": system_prompt(base, seed, num_tokens)},
                {"role": "user", "content": f"Question {seed}: what comes after {WORDS[seed % 26]}?"}]
    first, turn1_s = chat(base, messages, 16)
    messages += [{"role": "assistant", "content": first["choices"][0]["message"]["content"] or "ok"},
                 {"role": "user", "content": "And after that one?"}]
    second, turn2_s = chat(base, messages, 1)
    usage = second["usage"]
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return {"turn1_s": turn1_s, "turn2_s": turn2_s, "prompt": usage["prompt_tokens"], "cached": cached}


def run_mode(cache_on: bool, args) -> dict:
    env = {"SPARKINFER_PREFIX_CACHE": "1" if cache_on else "0"}
    with EngineStack(env=env) as stack, running_gateway(stack) as base:
        conversation(base, 999, args.system_tokens)   # warm-up: imports, first long-prefill allocations
        runs = [conversation(base, seed, args.system_tokens) for seed in range(args.conversations)]
    return {"turn1_ms": statistics.median(r["turn1_s"] for r in runs) * 1e3,
            "turn2_ms": statistics.median(r["turn2_s"] for r in runs) * 1e3,
            "prompt": runs[0]["prompt"], "cached": [r["cached"] for r in runs]}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.prefix_cache_ttft", description=__doc__.splitlines()[0])
    parser.add_argument("--system-tokens", type=int, default=1500)
    parser.add_argument("--conversations", type=int, default=5)
    args = parser.parse_args(argv)
    results = {mode: run_mode(mode == "on", args) for mode in ("off", "on")}
    print(f"prefix cache TTFT, tiny model, ~{args.system_tokens}-token system prompt, "
          f"median of {args.conversations} conversations")
    print("| cache | turn 1 (16 tokens) ms | turn 2 TTFT ms | turn 2 prompt tokens | cached tokens |")
    print("| --- | --- | --- | --- | --- |")
    for mode, r in results.items():
        print(f"| {mode} | {r['turn1_ms']:.0f} | {r['turn2_ms']:.0f} | {r['prompt']} | {r['cached']} |")
    speedup = results["off"]["turn2_ms"] / results["on"]["turn2_ms"]
    print(f"turn 2 TTFT: {speedup:.1f}x faster with the cache")


if __name__ == "__main__":
    main()
