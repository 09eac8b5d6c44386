"""llama-server's /metrics as its readers parse it: eleven llamacpp:* series (tools/server/server-context.cpp; the
list LLMKube's llama.cpp board was built from, defilantech/LLMKube#1371), each one bare line `llamacpp:<name> <value>`.
The gateway wrote only four, each with a model_name label, so the readers that match the bare line (a regex
`^llamacpp:prompt_tokens_total ([0-9.eE+-]+)$`, as llama.cpp dashboards and TUIs do) found nothing, and the ones that
divide tokens_predicted_total by tokens_predicted_seconds_total for tokens per second had no seconds to divide by."""
import re

import orjson

# llama-server's series (server-context.cpp's /metrics handler), by the name its readers match.
NAMES = ("prompt_tokens_total", "prompt_seconds_total", "tokens_predicted_total", "tokens_predicted_seconds_total",
         "n_decode_total", "n_tokens_max", "n_busy_slots_per_decode", "prompt_tokens_seconds",
         "predicted_tokens_seconds", "requests_processing", "requests_deferred")


async def read(client) -> dict:
    """{name: value} of every llamacpp:* line, read as its readers read it: `^llamacpp:<name> <number>$`."""
    text = (await (await client.get("/metrics")).read()).decode()
    return {m[1]: float(m[2]) for m in re.finditer(r"^llamacpp:(\w+) ([0-9.eE+-]+)$", text, re.M)}


async def complete(client, body: dict) -> dict:
    response = await client.post("/completion", data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    return orjson.loads(await response.read())


async def test_every_series_is_one_bare_line(stack):
    client, fake = stack
    fake.load_fields = {"num_steps": 40, "num_step_rows": 100}
    before = await read(client)
    assert sorted(before) == sorted(NAMES)
    answers = [await complete(client, {"prompt": "hello there", "n_predict": 6}),
               await complete(client, {"prompt": "a b c d e f g", "n_predict": 3})]
    after = await read(client)
    for name in ("prompt_tokens_total", "tokens_predicted_total"):
        field = "tokens_evaluated" if name.startswith("prompt") else "tokens_predicted"
        assert after[name] - before[name] == sum(a[field] for a in answers)
    assert after["prompt_seconds_total"] > before["prompt_seconds_total"]
    assert after["tokens_predicted_seconds_total"] > before["tokens_predicted_seconds_total"]
    # The most tokens a slot held: llama-server's n_tokens of a slot, as each answer's tokens_cached counts them.
    assert after["n_tokens_max"] >= max(a["tokens_cached"] for a in answers)
    # The scheduler's steps and the sequences they ran: 100 rows over 40 steps is 2.5 a step.
    assert after["n_decode_total"] == 40 and after["n_busy_slots_per_decode"] == 2.5


async def test_throughput_gauges_are_the_tokens_since_the_last_scrape(stack):
    client, _ = stack
    before = await read(client)
    await complete(client, {"prompt": "hello there", "n_predict": 8})
    after = await read(client)

    def rate(tokens: str, seconds: str) -> float:
        return (after[tokens] - before[tokens]) / (after[seconds] - before[seconds])
    assert after["prompt_tokens_seconds"] == rate("prompt_tokens_total", "prompt_seconds_total") > 0
    assert after["predicted_tokens_seconds"] == rate("tokens_predicted_total", "tokens_predicted_seconds_total") > 0
    # Nothing processed since: llama-server's buckets were reset by the scrape before, so 0.
    idle = await read(client)
    assert idle["prompt_tokens_seconds"] == idle["predicted_tokens_seconds"] == 0.0


async def test_no_llama_cpp_series_carries_a_label(stack):
    client, fake = stack
    fake.load_fields = {"num_steps": 3, "num_step_rows": 3}
    text = (await (await client.get("/metrics")).read()).decode()
    assert "\nllamacpp:n_decode_total 3.0\n" in text and "\nllamacpp:n_busy_slots_per_decode 1.0\n" in text
    assert [line for line in text.splitlines() if line.startswith("llamacpp:") and "{" in line] == []
