"""Ollama keep_alive parsed as Ollama parses it (Go durations, seconds, negative = forever) and the /api/ps
bookkeeping it drives (fake scheduler): expires_at = last use + keep_alive, nothing listed after an unload or
once it has passed."""
import asyncio
import math
import time
from datetime import datetime

import orjson
import pytest
from pydantic import TypeAdapter

from gateway.app import create_app
from gateway.client import SchedulerClient
from gateway.config import GatewayConfig
from gateway.errors import InvalidRequest
from gateway.fake_scheduler import FakeServing, build_tokenizer, start_fake_server, start_test_client
from gateway.ollama_keepalive import parse_keep_alive

# Go's RFC 3339 times (any number of fraction digits) as ollama-python's pydantic types read them.
_TIME = TypeAdapter(datetime)

CHAT = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "stream": False, "think": False}


@pytest.mark.parametrize("value,seconds", [
    ("5m", 300), ("1h30m", 5400), ("1.5h", 5400), ("300ms", 0.3), ("2h45m30.5s", 9930.5), ("0", 0), ("0s", 0),
    (0, 0), (3600, 3600), (2.5, 2.5), ("-0", 0), ("+0", 0), ("-1s", math.inf), (-1, math.inf), ("-5m", math.inf),
    (None, None), ("2562047h", 2562047 * 3600.0), (1e300, math.inf), (9e18, math.inf)])
def test_keep_alive_parses_like_ollama(value, seconds):
    assert parse_keep_alive(value) == seconds


# (keep_alive, Go's time.ParseDuration error): its three messages, the string quoted as its time.quote writes it
# (each byte of a non-ASCII or control character as \xNN).
GO_DURATION_ERRORS = [
    ("bogus", 'time: invalid duration "bogus"'), ("m", 'time: invalid duration "m"'),
    ("", 'time: invalid duration ""'), ("--1s", 'time: invalid duration "--1s"'), (".s", 'time: invalid duration ".s"'),
    ("2562048h", 'time: invalid duration "2562048h"'), ("-2562048h", 'time: invalid duration "-2562048h"'),
    ("9999999999999999h", 'time: invalid duration "9999999999999999h"'),
    ("\u0661\u0660m", 'time: invalid duration "\\xd9\\xa1\\xd9\\xa0m"'),
    ("\u0661\u0660", 'time: invalid duration "\\xd9\\xa1\\xd9\\xa0"'),
    ('"5m"', 'time: invalid duration "\\"5m\\""'),
    ("1h5", 'time: missing unit in duration "1h5"'), ("1..5s", 'time: missing unit in duration "1..5s"'),
    # A number as a string is no duration to Go either: Ollama reads a string with time.ParseDuration only (its
    # Duration.UnmarshalJSON), so "-1" is its 400, which clients report (karakeep-app/karakeep#2409,
    # skalesapp/skales#281 against a running Ollama: 'time: missing unit in duration "-1"'); -1 as a number is forever.
    ("-1", 'time: missing unit in duration "-1"'), ("3600", 'time: missing unit in duration "3600"'),
    ("1.5", 'time: missing unit in duration "1.5"'), ("99999999999", 'time: missing unit in duration "99999999999"'),
    ("5d", 'time: unknown unit "d" in duration "5d"'), ("30min", 'time: unknown unit "min" in duration "30min"'),
    ("5 m", 'time: unknown unit " m" in duration "5 m"'), ("1h-", 'time: unknown unit "h-" in duration "1h-"'),
    ("5m\n", 'time: unknown unit "m\\x0a" in duration "5m\\x0a"'),
    ("1\uff10s", 'time: unknown unit "\\xef\\xbc\\x90s" in duration "1\\xef\\xbc\\x90s"'),
]


@pytest.mark.parametrize("value, words", GO_DURATION_ERRORS, ids=[repr(v) for v, _ in GO_DURATION_ERRORS])
def test_invalid_durations_are_refused_with_gos_message(value, words):
    with pytest.raises(InvalidRequest) as info:
        parse_keep_alive(value)
    assert info.value.message == words


@pytest.fixture
async def client():
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    server, addr = await start_fake_server(fake)
    client = await start_test_client(create_app(GatewayConfig(scheduler_addr=addr), SchedulerClient(addr)))
    client.fake = fake
    yield client
    await client.close()
    await server.stop(None)


async def post(client, path, body):
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def ps_expiry(client):
    response = await client.get("/api/ps")
    models = orjson.loads(await response.read())["models"]
    if not models:
        return None
    assert len(models) == 1 and models[0]["name"] == "fake-model:latest"
    return _TIME.validate_python(models[0]["expires_at"]).timestamp() - time.time()


async def test_bogus_keep_alive_is_a_400(client):
    status, body = await post(client, "/api/generate", {"model": "fake-model", "prompt": "x",
                                                        "keep_alive": "bogus", "stream": False})
    assert status == 400 and body == {"error": 'time: invalid duration "bogus"'}


@pytest.mark.parametrize("path, field, value, error", [
    ("/api/generate", "keep_alive", True, "Unsupported type: 'bool'"),
    ("/api/chat", "keep_alive", {"m": 5}, "Unsupported type: 'map[string]interface {}'"),
    ("/api/chat", "format", "JSON", 'invalid format: "\\"JSON\\""; expected "json" or a valid JSON Schema object'),
    ("/api/generate", "format", True, 'invalid format: "true"; expected "json" or a valid JSON Schema object'),
], ids=["keep_alive bool", "keep_alive object", "format word", "format bool"])
async def test_wrong_kinds_of_keep_alive_and_format_are_ollamas_words(client, path, field, value, error):
    """As Ollama words them (api/types.go Duration.UnmarshalJSON; llm/llama_server.go), never a Python repr."""
    body = {"model": "fake-model", "prompt": "x", "messages": [{"role": "user", "content": "x"}], field: value}
    assert await post(client, path, body) == (400, {"error": error})


async def test_ps_follows_keep_alive_and_unload(client):
    assert 290 < await ps_expiry(client) <= 300                    # default 5m from the gateway's start
    status, _ = await post(client, "/api/chat", {**CHAT, "keep_alive": "1h"})
    assert status == 200 and 3590 < await ps_expiry(client) <= 3600
    status, _ = await post(client, "/api/chat", {**CHAT, "keep_alive": -1})
    assert status == 200 and await ps_expiry(client) > 50 * 365 * 86400
    status, body = await post(client, "/api/generate", {"model": "fake-model", "keep_alive": 0})
    assert status == 200 and body["done_reason"] == "unload" and await ps_expiry(client) is None
    status, body = await post(client, "/api/generate", {"model": "fake-model"})
    assert status == 200 and body["done_reason"] == "load" and 290 < await ps_expiry(client) <= 300
    status, _ = await post(client, "/api/chat", {**CHAT, "keep_alive": "0s"})
    assert status == 200 and await ps_expiry(client) is None        # Ollama unloads right after this one


@pytest.mark.parametrize("keep_alive", [-1, "-1m"])
async def test_ps_shows_a_model_kept_forever_as_ollama_does(client, keep_alive):
    """A negative keep_alive is Go's longest Duration, so Ollama's /api/ps shows now + (2^63 - 1) ns, about 292 years
    (api/types.go Duration.UnmarshalJSON, server/sched.go expiresAt): it was now + 100 years."""
    status, _ = await post(client, "/api/chat", {**CHAT, "keep_alive": keep_alive})
    assert status == 200 and abs(await ps_expiry(client) - (2**63 - 1) / 1e9) < 60


@pytest.mark.parametrize("keep_alive", [1e300, 9e18, 99999999999, "2562047h"])
async def test_ps_answers_after_a_keep_alive_beyond_any_date(client, keep_alive):
    status, _ = await post(client, "/api/chat", {**CHAT, "keep_alive": keep_alive})
    assert status == 200
    response = await client.get("/api/ps")
    body = orjson.loads(await response.read())
    assert response.status == 200 and body["models"][0]["name"] == "fake-model:latest"
    assert await ps_expiry(client) > 50 * 365 * 86400


async def test_format_with_tools_allows_a_call_or_the_json(client):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    fake = client.fake
    status, body = await post(client, "/api/chat", {**CHAT, "format": "json", "tools": tools})
    assert status == 200 and body["done"] is True
    grammar = fake.script.requests[-1].constraint.grammar
    assert grammar.startswith("start: (calls | %json{") and "\ncalls: call" in grammar and "<function=f>" in grammar


async def test_ps_lists_no_model_while_the_worker_is_down(client):
    assert await ps_expiry(client) is not None
    client.fake.worker_alive = False
    assert await ps_expiry(client) is None
    client.fake.worker_alive = True
    assert await ps_expiry(client) is not None


async def test_ps_lists_no_model_once_its_keep_alive_has_run_out(client):
    """Ollama's scheduler unloads an idle model when its keep_alive ends, so /api/ps lists none; it went on listing
    the model with an expires_at in the past. The next request loads it again."""
    status, _ = await post(client, "/api/chat", {**CHAT, "keep_alive": "1s"})
    assert status == 200 and 0 < await ps_expiry(client) <= 1
    await asyncio.sleep(1.2)
    response = await client.get("/api/ps")
    assert orjson.loads(await response.read()) == {"models": []}
    status, body = await post(client, "/api/generate", {"model": "fake-model"})
    assert status == 200 and body["done_reason"] == "load" and 290 < await ps_expiry(client) <= 300


@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
    ("/api/v0/completions", {"prompt": "hi", "max_tokens": 2}),
    ("/v1/messages", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
], ids=["openai", "lmstudio", "anthropic"])
async def test_a_generation_on_any_api_keeps_the_model_loaded(client, path, body):
    """As in Ollama, where /v1 requests use (and load) the same model: expired, then used on another API, the model
    is listed again with the default 5m from then."""
    await post(client, "/api/chat", {**CHAT, "keep_alive": "1s"})
    await asyncio.sleep(1.2)
    assert await ps_expiry(client) is None
    status, _ = await post(client, path, {"model": "fake-model", **body})
    assert status == 200 and 290 < await ps_expiry(client) <= 300


@pytest.mark.parametrize("device, size_vram", [("cpu", 0), ("cuda:0 (NVIDIA H200)", 2000), ("", 2000)],
                         ids=["cpu", "cuda", "device not reported"])
async def test_ps_size_vram_is_zero_when_the_model_runs_on_the_cpu(client, device, size_vram):
    """Ollama's /api/ps gives size_vram, the part of the model in GPU memory (server/routes.go PsHandler: the
    runner's sizeVRAM): 0 for a model on the CPU, which `ollama ps` shows as "100% CPU". It was the whole size on
    the CPU too, so the model read as fully in VRAM."""
    client.fake.device = device
    assert (await post(client, "/api/chat", CHAT))[0] == 200
    models = orjson.loads(await (await client.get("/api/ps")).read())["models"]
    assert [(entry["size"], entry["size_vram"]) for entry in models] == [(2000, size_vram)]


@pytest.mark.parametrize("unload", [
    {"keep_alive": 0},
    None,
], ids=["unload-request-meanwhile", "keep_alive-0-generation"])
async def test_ps_lists_the_model_until_its_last_generation_ends(client, unload):
    """Ollama unloads a runner only once its last request is done (server/sched.go: expireRunner, and a finished
    request with keep_alive 0, expire it at refCount 0): /api/ps listed no model while a generation still ran, after
    a keep_alive 0 unload sent meanwhile or during a keep_alive 0 generation itself."""
    client.fake.script.delay_s, client.fake.script.reply = 0.05, "1, 2, 3, 4, 5, 6, 7, 8, 9, 10"
    body = {**CHAT, "stream": False} if unload else {**CHAT, "keep_alive": 0}
    running = asyncio.create_task(post(client, "/api/chat", body))
    await asyncio.sleep(0.2)
    if unload:
        status, answer = await post(client, "/api/generate", {"model": "fake-model", **unload})
        assert status == 200 and answer["done_reason"] == "unload"
    still_running, during = not running.done(), await ps_expiry(client)
    status, _ = await running
    assert status == 200 and still_running and during is not None
    assert await ps_expiry(client) is None


async def ps_context_length(client):
    models = orjson.loads(await (await client.get("/api/ps")).read())["models"]
    return [entry["context_length"] for entry in models]


async def test_ps_context_length_is_the_window_the_last_request_loaded(client):
    """Ollama reloads a runner whose num_ctx differs from the request's (server/sched.go needsReload), so /api/ps
    gives the window the model was last used with (ollama/ollama#11331: `ollama ps` shows 8192 after `/set parameter
    num_ctx 8192`); clients that size prompts from /api/ps read it. It was always the model's context length."""
    assert await ps_context_length(client) == [2048]
    steps = [("/api/chat", {**CHAT, "options": {"num_ctx": 1024}}, [1024]),
             ("/api/generate", {"model": "fake-model", "options": {"num_ctx": 512}}, [512]),
             ("/api/generate", {"model": "fake-model", "prompt": "x", "stream": False, "think": False,
                                "options": {"num_ctx": 300, "num_predict": 1}}, [300]),
             ("/api/embed", {"model": "fake-model", "options": {"num_ctx": 256}}, [256]),
             ("/api/chat", {**CHAT, "options": {"num_ctx": 99999}}, [2048]),     # clamped to the model's, as Ollama
             ("/api/chat", {**CHAT, "options": {"num_ctx": 700}}, [700]),
             ("/v1/chat/completions", {"model": "fake-model", "max_tokens": 1,
                                       "messages": [{"role": "user", "content": "hi"}]}, [2048]),
             ("/api/chat", {**CHAT, "options": {"num_ctx": 600}}, [600]),
             ("/api/chat", CHAT, [2048])]                                   # no num_ctx: the default window
    for path, body, expected in steps:
        status, _ = await post(client, path, body)
        assert status == 200 and await ps_context_length(client) == expected, (path, body)
