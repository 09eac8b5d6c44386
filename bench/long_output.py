"""Bench (one process: gateway, client and token source on one event loop, bench/gateway_procs.py's DirectClient):
whether the gateway's CPU per token grows with the length of the answer (a rescan of the whole output per token:
`text +=` on an attribute, a parser reading the whole call again, a list copied).

Each scenario streams one answer of N tokens (1k, 8k, 32k) through a route, C = 1. The token source records this
process's CPU time (time.process_time) as it hands over each token; a token's cost is the time to the next one, which
holds all the gateway does with it (detokenize, stop strings, reasoning split, tool parser, shaping, JSON, the
write) and the client's read of it. Printed per scenario and N: CPU us a token over the first and the last W tokens
(W = min(1000, N / 4); the last W end before the final token, whose message also carries the answer's end), and
their ratio. With --compare OLD.csv, the figures of an earlier run (before a fix) beside these. Writes
long_output.csv and long_output.png to $OUT (else bench/out). The scheduler's side of the same question is
bench/scheduler_host.py's long-output scenario.
Run: python -m bench.long_output [--lengths 1000,8000,32000] [--only chat_stream,...] [--compare OLD.csv]
"""
import argparse
import asyncio
import csv
import os
import time

from bench.gateway_chats import TOOLS
from bench.gateway_procs import REPLY, DirectClient, direct_fake
from bench.output import output_dir, write_csv
from bench.plotting import pyplot

MODEL = "fake-model"
USER = [{"role": "user", "content": "Say something."}]
THINK = {"chat_template_kwargs": {"enable_thinking": True}}
# Thinking off: a call is answer text from its first token (with the thinking open, the reasoning splitter holds a
# call until the thinking's end says what it is, and the tool parser reads it whole at the end).
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}
# What the model writes: "text" (REPLY repeated), "think" (thinking for half the answer, then the answer), a call
# whose one string parameter runs to the end ("xml_call": Qwen3-Coder's form, "json_call": the Hermes one), or a
# line and then special tokens that add no text ("specials").
OUTPUTS = {
    "text": ("", ""),
    "xml_call": ("<tool_call>\n<function=tool_1>\n<parameter=city>\n", ""),
    "json_call": ('<tool_call>\n{"name": "tool_1", "arguments": {"city": "', ""),
    "think": ("", "</think>\n\n"),
    "specials": ("Hello world.", ""),   # then <|endoftext|> repeated: special tokens skipped, no text
}


def chat(**extra) -> dict:
    return {"model": MODEL, "messages": USER, **extra}


# name -> (path, body, the body's max tokens field, OUTPUTS key)
SCENARIOS = {
    "chat_stream": ("/v1/chat/completions", chat(stream=True), "max_tokens", "text"),
    "chat_stream_tools_text": ("/v1/chat/completions", chat(stream=True, tools=TOOLS), "max_tokens", "text"),
    "chat_stream_xml_call": ("/v1/chat/completions", chat(stream=True, tools=TOOLS), "max_tokens", "xml_call"),
    "chat_stream_json_call": ("/v1/chat/completions", chat(stream=True, tools=TOOLS), "max_tokens", "json_call"),
    "chat_stream_xml_call_no_think": ("/v1/chat/completions", chat(stream=True, tools=TOOLS, **NO_THINK),
                                      "max_tokens", "xml_call"),
    "chat_stream_json_call_no_think": ("/v1/chat/completions", chat(stream=True, tools=TOOLS, **NO_THINK),
                                       "max_tokens", "json_call"),
    "chat_stream_reasoning": ("/v1/chat/completions", chat(stream=True, **THINK), "max_tokens", "think"),
    "chat_stream_specials": ("/v1/chat/completions", chat(stream=True, **NO_THINK), "max_tokens", "specials"),
    "chat_stream_stop4": ("/v1/chat/completions", chat(stream=True, stop=["###", "END", "\n\n\n", "STOP!"]),
                          "max_tokens", "text"),
    "chat_stream_logprobs": ("/v1/chat/completions", chat(stream=True, logprobs=True, top_logprobs=5), "max_tokens",
                             "text"),
    "chat": ("/v1/chat/completions", chat(), "max_tokens", "text"),
    "chat_xml_call": ("/v1/chat/completions", chat(tools=TOOLS), "max_tokens", "xml_call"),
    "chat_stream_usage": ("/v1/chat/completions", chat(stream=True, stream_options={
        "include_usage": True, "continuous_usage_stats": True}), "max_tokens", "text"),
    "chat_stream_n2": ("/v1/chat/completions", chat(stream=True, n=2), "max_tokens", "text"),
    "completions_logprobs": ("/v1/completions", {"model": MODEL, "prompt": "Say something.", "stream": True,
                                                 "logprobs": 5}, "max_tokens", "text"),
    "lmstudio_v0": ("/api/v0/chat/completions", chat(stream=True), "max_tokens", "text"),
    "lmstudio_v1": ("/api/v1/chat", {"model": MODEL, "input": "Say something.", "stream": True},
                    "max_output_tokens", "text"),
    "completions": ("/v1/completions", {"model": MODEL, "prompt": "Say something.", "stream": True}, "max_tokens",
                    "text"),
    "api_chat": ("/api/chat", chat(), "num_predict", "text"),
    "api_chat_tools": ("/api/chat", chat(tools=TOOLS), "num_predict", "xml_call"),
    "api_chat_tools_no_think": ("/api/chat", chat(tools=TOOLS, think=False), "num_predict", "xml_call"),
    "api_generate": ("/api/generate", {"model": MODEL, "prompt": "Say something."}, "num_predict", "text"),
    "messages": ("/v1/messages", chat(stream=True), "max_tokens", "text"),
    "messages_tools": ("/v1/messages", chat(stream=True, tools=[{
        "name": "tool_1", "description": "d", "input_schema": TOOLS[1]["function"]["parameters"]}]), "max_tokens",
        "xml_call"),
    "messages_tools_no_think": ("/v1/messages", chat(stream=True, thinking={"type": "disabled"}, tools=[{
        "name": "tool_1", "description": "d", "input_schema": TOOLS[1]["function"]["parameters"]}]), "max_tokens",
        "xml_call"),
    "responses": ("/v1/responses", {"model": MODEL, "input": "Say something.", "stream": True}, "max_output_tokens",
                  "text"),
    "responses_tools_no_think": ("/v1/responses", {
        "model": MODEL, "input": "Say something.", "stream": True, "reasoning": {"effort": "none"},
        "tools": [dict(TOOLS[1]["function"], type="function")]}, "max_output_tokens", "xml_call"),
    "llama_completion": ("/completion", {"prompt": "Say something.", "stream": True}, "n_predict", "text"),
}


def body_of(name: str, num_tokens: int) -> dict:
    _, body, field, _ = SCENARIOS[name]
    if field == "num_predict":
        return dict(body, options={"num_predict": num_tokens})
    return dict(body, **{field: num_tokens})


def output_ids(tokenizer, kind: str, num_tokens: int) -> list:
    """num_tokens ids (at least) of the OUTPUTS kind: its head, REPLY repeated, and where it has one its middle
    (the thinking's end) halfway."""
    head, middle = OUTPUTS[kind]
    if kind == "specials":
        return tokenizer.encode(head).ids + [tokenizer.token_to_id("<|endoftext|>")] * num_tokens
    reply = tokenizer.encode(REPLY).ids
    filler = (reply * (num_tokens // len(reply) + 2))[:num_tokens]
    ids = tokenizer.encode(head).ids if head else []
    if middle:
        half = num_tokens // 2
        return ids + filler[:half] + tokenizer.encode(middle).ids + filler[half:]
    return ids + filler


class TimedClient(DirectClient):
    """DirectClient whose calls record this process's CPU time (ns) as each message is read: `times`."""

    def __init__(self, fake):
        super().__init__(fake)
        self.times: list = []

    def generate(self, request):
        stream = super().generate(request)
        call, times = stream._call, self.times
        read = call.read

        async def timed_read():
            times.append(time.process_time_ns())
            return await read()

        call.read = timed_read
        return stream


async def run_one(client, timed: TimedClient, name: str, num_tokens: int) -> dict:
    """One answer of num_tokens through scenario `name`; its row: us a token over the first and last W tokens."""
    path = SCENARIOS[name][0]
    timed.fake.script.token_ids = output_ids(timed.fake.tokenizer, SCENARIOS[name][3], num_tokens)
    timed.times = []
    num_bytes = 0
    async with client.post(path, json=body_of(name, num_tokens)) as resp:
        async for chunk in resp.content.iter_any():
            num_bytes += len(chunk)
        if resp.status != 200:
            raise RuntimeError(f"{name}: HTTP {resp.status}: {await resp.text()}")
    times = timed.times
    # times[i]: when message i was asked for; message i's cost is times[i + 1] - times[i]. The last message (the
    # answer's end) is left out: its once-per-answer work is no per-token cost.
    num = len(times) - 1
    window = max(1, min(1000, num // 4))
    first = (times[window] - times[0]) / window / 1e3
    last = (times[num - 1] - times[num - 1 - window]) / window / 1e3
    return {"scenario": name, "tokens": num_tokens, "window": window, "first_us": first, "last_us": last,
            "ratio": last / first, "bytes": num_bytes}


async def run_all(args) -> list:
    from gateway.app import create_app
    from gateway.config import GatewayConfig
    from gateway.fake_scheduler import start_test_client

    timed = TimedClient(direct_fake())
    client = await start_test_client(create_app(GatewayConfig(scheduler_addr="direct", access_log=False), timed))
    rows = []
    try:
        for name in args.only or SCENARIOS:
            for num_tokens in args.lengths:
                rows.append(await run_one(client, timed, name, num_tokens))
                print_row(rows[-1], args.before)
    finally:
        await client.close()
    return rows


def print_row(row: dict, before: dict) -> None:
    old = before.get((row["scenario"], row["tokens"]))
    was = f"{old['first_us']:.1f} | {old['last_us']:.1f} | {old['ratio']:.2f} | " if old else ""
    print(f"| {row['scenario']} | {row['tokens']} | {was}{row['first_us']:.1f} | {row['last_us']:.1f} | "
          f"{row['ratio']:.2f} |", flush=True)


def read_csv(path: str) -> dict:
    """{(scenario, tokens): row} of an earlier run's long_output.csv (--compare)."""
    with open(path, encoding="utf-8") as f:
        return {(r["scenario"], int(r["tokens"])): {k: float(r[k]) for k in ("first_us", "last_us", "ratio")}
                for r in csv.DictReader(f)}


def write_outputs(out_dir: str, rows: list, before: dict, title: str) -> None:
    write_csv(os.path.join(out_dir, "long_output.csv"), rows)
    plt = pyplot("long_output.png")
    if plt is None:
        return
    longest = max(row["tokens"] for row in rows)
    mine = [row for row in rows if row["tokens"] == longest]
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(mine) + 1.5))
    names = [row["scenario"] for row in mine]
    if before:
        ax.barh(names, [before.get((n, longest), {}).get("ratio", 0) for n in names], color="lightgrey",
                label="before (--compare)")
    ax.barh(names, [row["ratio"] for row in mine], height=0.5, label="this run")
    for i, row in enumerate(mine):
        ax.text(row["ratio"], i, f" {row['first_us']:.0f} -> {row['last_us']:.0f} us", va="center", fontsize=7)
    ax.axvline(1.5, color="grey", linestyle="--", label="1.5x")
    ax.set(xlabel=f"gateway CPU a token, last {mine[0]['window']} / first {mine[0]['window']} of {longest} tokens",
           title=title)
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "long_output.png"), dpi=110)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.long_output", description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="1000,8000,32000", help="comma-separated answer lengths in tokens")
    parser.add_argument("--only", default="", help=f"comma-separated, of {', '.join(SCENARIOS)}")
    parser.add_argument("--compare", help="an earlier run's long_output.csv: its figures beside these")
    args = parser.parse_args(argv)
    args.lengths = [int(n) for n in args.lengths.split(",") if n]
    args.only = [n for n in args.only.split(",") if n]
    args.before = read_csv(args.compare) if args.compare else {}
    out_dir = output_dir()
    was = "before first us | before last us | before ratio | " if args.before else ""
    print(f"| scenario | tokens | {was}first us/token | last us/token | last / first |")
    print("|" + " --- |" * (5 + 3 * bool(args.before)))
    rows = asyncio.run(run_all(args))
    write_outputs(out_dir, rows, args.before, "gateway CPU a token late in a long answer vs early "
                                              "(bench/long_output.py)")
    print(f"wrote {out_dir}/long_output.csv, .png")


if __name__ == "__main__":
    main()
