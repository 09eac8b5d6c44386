"""Malformed input on every route the gateway's router holds (fake scheduler): each is a clear 4xx (or the route's
501 that says what it does not do) in the error shape of the API that owns the route, never a 5xx or a hang, and
the gateway serves normally afterwards. The routes come from the router itself, so a route added later is swept too:
bodies that are no JSON object (or no JSON, or not UTF-8, or nested 10000 deep), odd numbers and 10000-item lists in
fields, a method the route lacks (405 with Allow), unknown paths (404), HEAD, CORS preflights and query strings.

The shapes: OpenAI's `{"error": {"message", "type", ...}}` (vLLM, LM Studio, SGLang and the shared routes),
llama.cpp's (OpenAI's with `code` the HTTP status: its server's format_error_response), Anthropic's
`{"type": "error", "error": {...}}`, Ollama's `{"error": "..."}` and KoboldCpp's `{"detail": {"msg", "type"}}` on the
KoboldAI routes (/api/v1/generate, ..., /api/extra/*: koboldcpp.py's bad-input answers, which SillyTavern's KoboldAI
source reads as detail.msg). Field values follow each reference's reader:
pydantic's lax mode on /v1 (vLLM: an integral float or `true` is an int, 10.5 is not), Go's on Ollama's (its
Options.FromMap truncates a float to an int and refuses a bool).
The tables of the other sweeps: test_hostile_inputs.py (each field of 19 body routes of a wrong JSON type),
test_render_routes_as_chat.py (messages the chat refuses), test_gateway_http_compat.py (CORS, trailing slashes).
"""
import asyncio
import json
import re

import pytest

ANTHROPIC = {"/v1/messages", "/v1/messages/count_tokens"}
# llama-server's own routes (where vLLM or OpenAI has none of the same path): its error object.
LLAMA_CPP = {"/apply-template", "/completion", "/completions", "/embedding", "/embeddings", "/infill", "/lora-adapters",
             "/props", "/rerank", "/reranking", "/slots", "/slots/{id_slot}", "/v1/rerank", "/v1/reranking"}
# KoboldCpp's KoboldAI routes under /api/v1/, beside LM Studio's (every /api/extra/* route is KoboldCpp's too).
KOBOLD_V1 = {"/api/v1/generate", "/api/v1/model", "/api/v1/info/version", "/api/v1/config/max_context_length",
             "/api/v1/config/max_length"}
# Routes that answer any body: a probe, a cache flush (SGLang's and vLLM's ignore the body), and vLLM's
# /abort_requests, which reads a body it cannot parse as {} and so aborts every request in flight
# (vllm/entrypoints/serve/cancel/api_router.py: `with contextlib.suppress(Exception): body = await raw_request.json()`).
BODILESS = {"/ping", "/flush_cache", "/reset_prefix_cache", "/abort_requests",
            # KoboldCpp's abort reads a genkey only from a body that parses (koboldcpp.py), SillyTavern posts none.
            "/api/extra/abort",
            # text-generation-webui's stop-generation reads no body (extensions/openai/script.py).
            "/v1/internal/stop-generation"}
JSON = "application/json"
# Bodies no route can read as its JSON object: a 4xx on every route that reads one.
UNREADABLE = {
    "not-json": (b"{not json", JSON), "array": (b"[1, 2]", JSON), "string": (b'"x"', JSON), "number": (b"1", JSON),
    "null": (b"null", JSON), "true": (b"true", JSON), "empty": (b"", JSON), "empty-no-type": (b"", None),
    "form": (b"model=x", "application/x-www-form-urlencoded"), "nan": (b'{"model": NaN}', JSON),
    "infinity": (b'{"model": Infinity}', JSON), "1e400": (b'{"model": 1e400}', JSON),
    "nested-10000": (b'{"model": ' + b"[" * 10000 + b"]" * 10000 + b"}", JSON),
    # Go's decoder reads bytes that are not UTF-8, and a lone surrogate escape, as U+FFFD (Ollama's routes).
    "invalid-utf8": (b'{"model": "a\xff\xfe"}', JSON), "lone-surrogate": (b'{"model": "\\ud800"}', JSON),
}
OLLAMA_READS = {"invalid-utf8", "lone-surrogate"}
# Bodies read as the object they hold (a route whose fields are all optional may answer them 200): the object sent as
# text/plain (vLLM, llama.cpp and Ollama read the body whatever its type), after a UTF-8 BOM, with a key twice (the
# last one wins, as Python's, Go's and nlohmann's readers keep it).
READABLE = {"text-plain-object": (b'{"model": 1}', "text/plain"), "bom": (b'\xef\xbb\xbf{"model": 1}', JSON),
            "duplicate-keys": (b'{"model": 1, "model": 2}', JSON)}


def api_of(path: str) -> str:
    if path in ANTHROPIC:
        return "anthropic"
    if path in KOBOLD_V1 or path.startswith("/api/extra/"):
        return "kobold"
    if path.startswith("/api/") and not path.startswith(("/api/v0/", "/api/v1/")):
        return "ollama"
    return "llama.cpp" if path in LLAMA_CPP else "openai"


def shape_ok(api: str, status: int, body) -> bool:
    """Whether an error body is in the API's own shape, with a message."""
    error = body.get("error") if isinstance(body, dict) else None
    if api == "kobold":
        detail = body.get("detail") if isinstance(body, dict) else None
        return set(body) == {"detail"} and bool(detail.get("msg")) and isinstance(detail.get("type"), str)
    if api == "ollama":
        return set(body) == {"error"} and isinstance(error, str) and bool(error)
    if api == "anthropic":
        return body.get("type") == "error" and isinstance(error, dict) and bool(error.get("message"))
    ok = isinstance(error, dict) and bool(error.get("message")) and isinstance(error.get("type"), str)
    return ok and (error.get("code") == status if api == "llama.cpp" else True)


def router_paths(app) -> dict:
    """Each route's path (its trailing-slash twin left out) -> its methods."""
    paths = {}
    for route in app.router.routes():
        info = route.resource.get_info()
        path = info.get("path") or info.get("formatter")
        if path == "/" or not path.endswith("/"):
            paths.setdefault(path, set()).add(route.method)
    return paths


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", path.replace("{model_id}", "fake-model"))


async def answer(client, method: str, path: str, data=None, headers=None) -> tuple:
    """(status, headers, raw body); a hang is a failure."""
    response = await asyncio.wait_for(client.request(method, path, data=data, headers=headers or {}), 10)
    return response.status, response.headers, await asyncio.wait_for(response.read(), 10)


def fault(api: str, status: int, raw: bytes, four_xx: bool) -> str:
    """'' when the answer is a 4xx (or a 501) in the API's shape, or (not four_xx) a 2xx; else what is wrong."""
    if status < 300 and not four_xx:
        return ""
    if not (400 <= status < 500 or status == 501):
        return f"status {status}"
    try:
        body = json.loads(raw)
    except ValueError:
        return "not JSON"
    return "" if shape_ok(api, status, body) else f"not {api}'s error shape"


async def serves_normally(client) -> None:
    status, _, raw = await answer(client, "POST", "/v1/chat/completions", json.dumps(
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode(), {"Content-Type": JSON})
    assert status == 200 and json.loads(raw)["choices"][0]["message"], raw


@pytest.mark.parametrize("case", [*UNREADABLE, *READABLE])
async def test_a_malformed_body_is_a_4xx_in_the_routes_own_shape(stack, case):
    client, fake = stack
    data, content_type = UNREADABLE.get(case) or READABLE[case]
    faults = []
    for path, methods in router_paths(client.app).items():
        for method in methods & {"POST", "DELETE"}:
            status, _, raw = await answer(client, method, concrete(path), data,
                                          {"Content-Type": content_type} if content_type else {})
            api = api_of(path)
            unreadable = case in UNREADABLE and not (api == "ollama" and case in OLLAMA_READS)
            problem = fault(api, status, raw, four_xx=unreadable and path not in BODILESS)
            if problem:
                faults.append(f"{method} {path}: {problem}: {status} {raw[:120]!r}")
    assert not faults, "\n".join(faults)
    assert fake.script.requests == []
    await serves_normally(client)


HI = [{"role": "user", "content": "hi"}]
# Body routes, a valid body, and the numeric / list fields spoilt below with raw JSON literals.
FIELD_ROUTES = {
    "/v1/chat/completions": ({"messages": HI, "max_tokens": 4}, ["max_tokens", "temperature", "n", "seed", "stop"]),
    "/v1/completions": ({"prompt": "hi", "max_tokens": 4}, ["max_tokens", "logprobs", "seed", "stop", "prompt"]),
    "/v1/responses": ({"input": "hi", "max_output_tokens": 4}, ["max_output_tokens", "temperature", "input"]),
    "/v1/messages": ({"model": "fake-model", "max_tokens": 4, "messages": HI}, ["max_tokens", "stop_sequences"]),
    "/api/v0/chat/completions": ({"messages": HI, "max_tokens": 4}, ["max_tokens", "temperature", "stop"]),
    "/api/v1/chat": ({"model": "fake-model", "input": "hi"}, ["max_output_tokens", "temperature", "context_length"]),
    "/completion": ({"prompt": "hi", "n_predict": 4}, ["n_predict", "temperature", "n_probs", "stop"]),
    "/api/chat": ({"model": "fake-model", "messages": HI, "stream": False, "options": {"num_predict": 4}},
                  ["options.num_predict", "options.temperature", "options.seed", "options.stop", "keep_alive"]),
    "/api/generate": ({"model": "fake-model", "prompt": "hi", "stream": False, "options": {"num_predict": 4}},
                      ["options.num_predict", "options.stop", "context"]),
}
LITERALS = ["NaN", "Infinity", "-Infinity", "1e400", "-0", "-0.0", str(2 ** 64), str(-2 ** 64), "true", "false",
            "10.0", "10.5", '"10"', '"x"', "[1]", "{}", '"\\ud800"', json.dumps([f"s{i}" for i in range(10000)])]
# What each reference makes of some of them (status, and the limit the scheduler got): pydantic's lax int on /v1
# (vLLM: 10.0 and true are ints, 10.5 is not), Anthropic's strict int, Go's Options.FromMap on Ollama's (a float is
# truncated to an int, a bool refused), llama.cpp's JSON reader (an integral float is an int).
EXACT = [("/v1/chat/completions", "max_tokens", "10.0", 200, 10),
         ("/v1/chat/completions", "max_tokens", "true", 200, 1),
         ("/v1/chat/completions", "max_tokens", "10.5", 400, None), ("/v1/messages", "max_tokens", "true", 400, None),
         ("/api/chat", "options.num_predict", "10.5", 200, 10), ("/api/chat", "options.num_predict", "true", 400, None),
         ("/v1/chat/completions", "seed", str(2 ** 64), 400, None), ("/completion", "n_predict", "10.0", 200, 10)]


def spoilt(base: dict, field: str, literal: str) -> bytes:
    """The body as JSON text with `field` (a.b for a nested one) holding the raw literal."""
    body = json.loads(json.dumps(base))
    *outer, last = field.split(".")
    inner = body
    for key in outer:
        inner = inner.setdefault(key, {})
    inner[last] = "@@literal@@"
    return json.dumps(body).replace('"@@literal@@"', literal).encode()


@pytest.mark.parametrize("path", list(FIELD_ROUTES))
async def test_odd_numbers_and_lists_in_a_field_are_a_4xx_in_the_routes_shape_or_read(stack, path):
    client, fake = stack
    base, fields = FIELD_ROUTES[path]
    faults = []
    for field in fields:
        for literal in LITERALS:
            status, _, raw = await answer(client, "POST", path, spoilt(base, field, literal), {"Content-Type": JSON})
            problem = fault(api_of(path), status, raw, four_xx=False)
            if problem:
                faults.append(f"{field}={literal[:20]}: {problem}: {status} {raw[:120]!r}")
    assert not faults, "\n".join(faults)
    await serves_normally(client)


@pytest.mark.parametrize("path, field, literal, status, limit", EXACT,
                         ids=[f"{row[0]}-{row[1]}-{row[2][:8]}" for row in EXACT])
async def test_a_number_reads_as_the_routes_reference_reads_it(stack, path, field, literal, status, limit):
    client, fake = stack
    got, _, raw = await answer(client, "POST", path, spoilt(FIELD_ROUTES[path][0], field, literal),
                               {"Content-Type": JSON})
    assert got == status, raw
    if limit is None:
        assert fault(api_of(path), got, raw, four_xx=True) == "" and fake.script.requests == []
    else:
        assert fake.script.requests[-1].max_tokens == limit


def methods_at(paths: dict, url: str) -> set:
    """The methods of every route whose pattern matches url (/v1/responses/compact is also /v1/responses/{id})."""
    return {method for path, methods in paths.items()
            if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", path), url) for method in methods}


async def test_a_method_a_route_lacks_is_a_405_with_allow_in_the_routes_shape(stack):
    client, _ = stack
    paths = router_paths(client.app)
    faults = []
    for path in paths:
        url = concrete(path)
        allowed = methods_at(paths, url)
        for method in sorted({"GET", "POST", "PUT", "DELETE", "PATCH"} - allowed):
            status, headers, raw = await answer(client, method, url, b"{}", {"Content-Type": JSON})
            allow = set(headers.get("Allow", "").replace(" ", "").split(","))
            if status != 405 or allow != allowed or fault(api_of(path), status, raw, four_xx=True):
                faults.append(f"{method} {path}: {status} Allow={headers.get('Allow')} {raw[:100]!r}")
    assert not faults, "\n".join(faults)


@pytest.mark.parametrize("path, api", [("/nope", "openai"), ("/v1/nope", "openai"), ("/v1/messages/nope", "anthropic"),
                                       ("/api/nope", "ollama"), ("/api/chat/nope", "ollama"),
                                       ("/api/v0/nope", "openai"), ("/api/v1/nope", "openai"),
                                       ("/v1/chat/completion", "openai"), ("/V1/models", "openai")])
@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_an_unknown_path_is_a_404_in_its_apis_shape(stack, path, api, method):
    client, _ = stack
    status, _, raw = await answer(client, method, path, b"{}", {"Content-Type": JSON})
    assert status == 404 and fault(api, status, raw, four_xx=True) == "", raw
    assert path in raw.decode()


async def test_head_answers_every_get_route_as_get_does_without_a_body(stack):
    client, _ = stack
    faults = []
    for path, methods in router_paths(client.app).items():
        if "GET" not in methods or path in ("/flush_cache",):
            continue
        got, get_headers, body = await answer(client, "GET", concrete(path))
        status, headers, raw = await answer(client, "HEAD", concrete(path))
        if (status, raw) != (got, b"") or headers.get("Content-Type") != get_headers.get("Content-Type"):
            faults.append(f"HEAD {path}: {status} {raw[:60]!r} (GET: {got})")
    assert not faults, "\n".join(faults)


async def test_a_cors_preflight_on_every_route_allows_its_method(stack):
    """Browser clients (Open WebUI's direct connections, extensions) preflight each call: vLLM's CORSMiddleware
    answers 200, Ollama's gin-contrib/cors 204, each with Access-Control-Allow-Origin."""
    client, _ = stack
    faults = []
    for path, methods in router_paths(client.app).items():
        method = "POST" if "POST" in methods else sorted(methods)[0]
        status, headers, _ = await answer(client, "OPTIONS", concrete(path), headers={
            "Origin": "http://localhost:3000", "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "content-type,authorization"})
        allowed = headers.get("Access-Control-Allow-Methods", "")
        if status not in (200, 204) or headers.get("Access-Control-Allow-Origin") != "*" or method not in allowed:
            faults.append(f"OPTIONS {path}: {status} {dict(headers)}")
    assert not faults, "\n".join(faults)


async def test_a_query_string_on_a_get_route_changes_nothing(stack):
    client, _ = stack
    faults = []
    for path, methods in router_paths(client.app).items():
        if "GET" not in methods or path == "/flush_cache":
            continue
        plain, _, _ = await answer(client, "GET", concrete(path))
        status, _, raw = await answer(client, "GET", concrete(path) + "?foo=bar&limit=abc&x&%ff=%00")
        if status != plain:
            faults.append(f"GET {path}?...: {status} (without: {plain}) {raw[:100]!r}")
    assert not faults, "\n".join(faults)
    await serves_normally(client)
