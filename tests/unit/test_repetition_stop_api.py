"""vLLM's stop on a repeated token pattern (max_repetition_pattern_size, min_repetition_pattern_size,
repetition_min_count, or its newer repetition_detection object) as a /v1 client sees it, fake scheduler (which applies the scheduler's check): the choice ends
with finish_reason "repetition" and stop_reason "repetition_detected" (vLLM's FinishReason.REPETITION and
check_stop's stop_reason), its usage counts the tokens through the last copy, streamed and whole, each choice of
n > 1; bad values are vLLM's 400s (RepetitionDetectionParams.__post_init__); without the fields nothing changes.
Before, both forms were a 400 unsupported."""
import orjson
import pytest

from tests.unit.test_continuous_usage_choices import events

CHAT, COMPLETIONS, GENERATE = "/v1/chat/completions", "/v1/completions", "/inference/v1/generate"
REPEAT = {"max_repetition_pattern_size": 4, "min_repetition_pattern_size": 2, "repetition_min_count": 3}
# vLLM's newer form of the same (its requests' repetition_detection: RepetitionDetectionParams).
OBJECT = {"repetition_detection": {"max_pattern_size": 4, "min_pattern_size": 2, "min_count": 3}}
BODIES = {CHAT: {"model": "default", "messages": [{"role": "user", "content": "hi"}], "enable_thinking": False,
                 "max_tokens": 20},
          COMPLETIONS: {"model": "default", "prompt": "hi", "max_tokens": 20}}


def script_pattern(fake) -> list:
    """Scripts a reply of a two-token pattern, repeated ten times; returns the pattern's ids."""
    pattern = fake.tokenizer.encode("Hello world").ids[:2]
    assert len(pattern) == 2 and pattern[0] != pattern[1]
    fake.script.token_ids = pattern * 10
    return pattern


async def post(client, body, path):
    response = await client.post(path, data=orjson.dumps(body))
    raw = await response.read()
    return response.status, (events(raw) if body.get("stream") else orjson.loads(raw))


def text_of(path: str, choice: dict) -> str:
    return choice["text"] if path == COMPLETIONS else choice["message"]["content"]


@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("form", [REPEAT, OBJECT], ids=["fields", "object"])
async def test_the_choice_ends_on_the_third_copy_of_its_pattern(stack, path, n, form):
    client, fake = stack
    pattern = script_pattern(fake)
    status, body = await post(client, {**BODIES[path], **form, "n": n}, path)
    assert status == 200, body
    # Size 2, three copies: six tokens, though 20 were allowed and the reply runs to 20.
    assert [c["finish_reason"] for c in body["choices"]] == ["repetition"] * n
    assert [c["stop_reason"] for c in body["choices"]] == ["repetition_detected"] * n
    assert [text_of(path, c) for c in body["choices"]] == [fake.tokenizer.decode(pattern * 3)] * n
    assert body["usage"]["completion_tokens"] == 6 * n
    sent = fake.script.requests[-1]
    assert (sent.max_repetition_pattern_size, sent.min_repetition_pattern_size, sent.repetition_min_count) == (4, 2, 3)


@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
async def test_streamed_the_last_chunk_says_repetition(stack, path):
    client, fake = stack
    pattern = script_pattern(fake)
    request = {**BODIES[path], **REPEAT, "n": 2, "stream": True, "stream_options": {"include_usage": True}}
    status, chunks = await post(client, request, path)
    assert status == 200, chunks
    for index in (0, 1):
        mine = [c["choices"][0] for c in chunks if c["choices"] and c["choices"][0]["index"] == index]
        finishes = [c["finish_reason"] for c in mine if c["finish_reason"]]
        assert finishes == ["repetition"] and mine[-1]["stop_reason"] == "repetition_detected"
        pieces = [c.get("text") if path == COMPLETIONS else c["delta"].get("content") for c in mine]
        assert "".join(p or "" for p in pieces) == fake.tokenizer.decode(pattern * 3)
    assert chunks[-1]["usage"]["completion_tokens"] == 12


@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
@pytest.mark.parametrize("extra", [{}, {"max_repetition_pattern_size": 0, "min_repetition_pattern_size": 0,
                                        "repetition_min_count": 0}], ids=["without", "zeros"])
async def test_without_the_fields_a_repeating_reply_runs_to_max_tokens(stack, path, extra):
    client, fake = stack
    script_pattern(fake)
    status, body = await post(client, {**BODIES[path], **extra}, path)
    assert status == 200, body
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length" and choice["stop_reason"] is None
    assert body["usage"]["completion_tokens"] == 20
    sent = fake.script.requests[-1]
    assert (sent.max_repetition_pattern_size, sent.min_repetition_pattern_size, sent.repetition_min_count) == (0, 0, 0)


async def test_min_tokens_holds_the_check_off(stack):
    client, fake = stack
    script_pattern(fake)
    status, body = await post(client, {**BODIES[COMPLETIONS], **REPEAT, "min_tokens": 9}, COMPLETIONS)
    # From the 9th token on: tokens 4..9 are three copies again, so it ends at 9.
    assert status == 200 and body["choices"][0]["finish_reason"] == "repetition", body
    assert body["usage"]["completion_tokens"] == 9


BAD = [
    ({"max_repetition_pattern_size": -1, "repetition_min_count": 3}, "max_repetition_pattern_size", "must be >=0"),
    ({"max_repetition_pattern_size": 2, "min_repetition_pattern_size": 3, "repetition_min_count": 3},
     "min_repetition_pattern_size", "min_repetition_pattern_size <= max_repetition_pattern_size"),
    ({"max_repetition_pattern_size": 4, "repetition_min_count": 1}, "repetition_min_count", "must be >= 2"),
    ({"max_repetition_pattern_size": 4}, "repetition_min_count", "must be >= 2"),
    ({"max_repetition_pattern_size": 65537, "repetition_min_count": 2}, "max_repetition_pattern_size",
     "at most 65536, got 65537"),
    ({"max_repetition_pattern_size": 4, "repetition_min_count": 1001}, "repetition_min_count",
     "at most 1000, got 1001"),
]


@pytest.mark.parametrize("path", [CHAT, COMPLETIONS], ids=["chat", "completions"])
@pytest.mark.parametrize("extra,param,message", BAD, ids=["negative", "min-above-max", "count-1", "no-count",
                                                           "size-too-big", "count-too-big"])
async def test_bad_values_are_vllms_400s(stack, path, extra, param, message):
    client, fake = stack
    status, body = await post(client, {**BODIES[path], **extra}, path)
    assert status == 400 and body["error"]["param"] == param and message in body["error"]["message"], body
    assert not fake.script.requests


OBJECT_BAD = [
    ({"max_pattern_size": 4}, "invalid_request_error", "repetition_detection", "min_count must be >= 2"),
    ({"max_pattern_size": 2, "min_pattern_size": 3, "min_count": 2}, "invalid_request_error", "repetition_detection",
     "min_pattern_size <= max_pattern_size"),
    ({"max_pattern_size": "x"}, "invalid_request_error", "repetition_detection.max_pattern_size", "integer"),
    ({"max_pattern_size": 4, "min_count": 2, "mode": "occurrence"}, "unsupported", "repetition_detection.mode",
     "only max_pattern_size"),
]


@pytest.mark.parametrize("value,kind,param,message", OBJECT_BAD, ids=["no-count", "min-above-max", "string", "mode"])
async def test_bad_repetition_detection_objects_are_400s(stack, value, kind, param, message):
    client, fake = stack
    status, body = await post(client, {**BODIES[CHAT], "repetition_detection": value}, CHAT)
    assert status == 400 and body["error"]["param"] == param and message in body["error"]["message"], body
    assert kind in (body["error"]["type"], body["error"]["code"]), body
    status, body = await post(client, {**BODIES[CHAT], **OBJECT, **REPEAT}, CHAT)
    assert status == 400 and body["error"]["param"] == "repetition_detection", body
    assert not fake.script.requests


async def test_the_generate_routes_sampling_params_carry_them(stack):
    client, fake = stack
    script_pattern(fake)
    request = {"token_ids": [1, 2, 3], "sampling_params": {"max_tokens": 20, **REPEAT}}
    status, body = await post(client, request, GENERATE)
    assert status == 200 and body["choices"][0]["finish_reason"] == "repetition", body
    assert len(body["choices"][0]["token_ids"]) == 6
    bad = {"token_ids": [1, 2, 3], "sampling_params": {"max_tokens": 20, "max_repetition_pattern_size": 4}}
    status, body = await post(client, bad, GENERATE)
    assert status == 400 and body["error"]["param"] == "sampling_params.repetition_min_count", body


@pytest.mark.parametrize("path,body", [
    ("/completion", {"prompt": "hi", "n_predict": 20}),
    ("/api/v0/chat/completions", {**BODIES[CHAT]}),
    ("/api/v0/completions", {**BODIES[COMPLETIONS]}),
    ("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 20}}),
], ids=["llama.cpp", "lmstudio-chat", "lmstudio-completions", "sglang"])
@pytest.mark.parametrize("form", [REPEAT, OBJECT], ids=["fields", "object"])
async def test_routes_of_servers_without_it_refuse_it(stack, path, body, form):
    # Their answers have no word for finish "repetition" (llama.cpp's stop_type, LM Studio's stats.stop_reason).
    client, fake = stack
    status, answer = await post(client, {**body, **form}, path)
    assert status == 400 and "repeated token pattern is not supported" in orjson.dumps(answer).decode(), answer
    assert not fake.script.requests


async def test_the_gateway_counts_it_under_its_own_finished_reason(stack):
    from gateway import metrics
    client, fake = stack
    script_pattern(fake)
    label = 'sparkinfer_gateway_request_success_total{finished_reason="repetition"'

    def count() -> float:
        line = next(line for line in metrics.render()[0].decode().splitlines() if line.startswith(label))
        return float(line.rsplit(" ", 1)[1])
    before = count()
    status, body = await post(client, {**BODIES[COMPLETIONS], **REPEAT, "n": 2}, COMPLETIONS)
    assert status == 200 and count() - before == 2, body


@pytest.mark.parametrize("form", [REPEAT, OBJECT], ids=["fields", "object"])
async def test_a_rendered_request_carries_it_to_the_generate_route(stack, form):
    # vLLM's /v1/chat/completions/render writes the request's SamplingParams, its repetition_detection among them.
    client, fake = stack
    status, rendered = await post(client, {**BODIES[CHAT], **form}, "/v1/chat/completions/render")
    assert status == 200, rendered
    assert rendered["sampling_params"]["repetition_detection"] == OBJECT["repetition_detection"]
    status, body = await post(client, rendered, GENERATE)
    assert status == 200, body
    sent = fake.script.requests[-1]
    assert (sent.max_repetition_pattern_size, sent.min_repetition_pattern_size, sent.repetition_min_count) == (4, 2, 3)
    status, plain = await post(client, BODIES[CHAT], "/v1/chat/completions/render")
    assert plain["sampling_params"]["repetition_detection"] is None


async def test_render_generate_derender_ends_as_the_chat_does(stack):
    # vLLM's scale-out flow: the generate answer's finish_reason "repetition" is derendered as the chat route answers.
    client, fake = stack
    script_pattern(fake)
    chat = {**BODIES[CHAT], **REPEAT}
    status, rendered = await post(client, chat, "/v1/chat/completions/render")
    status, generated = await post(client, rendered, GENERATE)
    assert generated["choices"][0]["finish_reason"] == "repetition", generated
    status, body = await post(client, {"model": "default", "generate_response": generated, "chat_request": chat,
                                       "prompt_tokens": len(rendered["token_ids"])}, "/v1/chat/completions/derender")
    assert status == 200, body
    status, direct = await post(client, chat, CHAT)
    assert body["choices"][0]["message"]["content"] == direct["choices"][0]["message"]["content"]
    assert (body["choices"][0]["finish_reason"], body["choices"][0]["stop_reason"]) == \
        ("repetition", "repetition_detected") == (direct["choices"][0]["finish_reason"],
                                                  direct["choices"][0]["stop_reason"])
