"""KoboldCpp's KoboldAI API (gateway/kobold_api.py), as KoboldAI Lite (index.html: submit_payload and
finalize_submit_payload's defaults) connects and generates (fake scheduler). Every route was a 404: Lite's KoboldCpp
connection (its default for a local server) could not list the model or generate."""
import re

import orjson
import pytest

REPLY = "Hello there\nYou: next"
LITE = {"n": 1, "max_context_length": 6144, "max_length": 24, "rep_pen": 1.05, "temperature": 0.75, "top_p": 0.92,
        "top_k": 100, "top_a": 0, "typical": 1, "tfs": 1, "rep_pen_range": 360, "rep_pen_slope": 0.7,
        "sampler_order": [6, 0, 1, 3, 4, 2, 5], "memory": "[Memory]\n", "trim_stop": True, "genkey": "KCPP1234",
        "min_p": 0, "dynatemp_range": 0, "dynatemp_exponent": 1, "smoothing_factor": 0, "smoothing_curve": 1,
        "nsigma": 0, "banned_tokens": [], "render_special": False, "logprobs": False, "presence_penalty": 0,
        "logit_bias": {}, "adaptive_target": -1.0, "adaptive_decay": 0.9, "stop_sequence": ["\nYou:"],
        "use_default_badwordsids": False, "bypass_eos": False, "quiet": True, "prompt": "You: hi\nKoboldAI:"}


async def _get(client, path: str):
    response = await client.get(path)
    return response.status, await response.json()


async def test_lite_reads_the_model_and_its_context(stack):
    client, _ = stack
    assert await _get(client, "/api/v1/model") == (200, {"result": "koboldcpp/fake-model"})
    assert await _get(client, "/api/v1/info/version") == (200, {"result": "1.2.5"})
    status, version = await _get(client, "/api/extra/version")
    assert status == 200 and version["result"] == "KoboldCpp" and version["txt2img"] is False
    status, context = await _get(client, "/api/v1/config/max_context_length")
    assert status == 200 and context["value"] > 0
    assert await _get(client, "/api/extra/true_max_context_length") == (200, context)


async def test_generate_puts_memory_first_and_trims_the_stop_sequence(stack):
    client, fake = stack
    response = await client.post("/api/v1/generate", data=orjson.dumps(LITE))
    body = await response.json()
    assert response.status == 200, body
    result = body["results"][0]
    assert (result["text"], result["finish_reason"]) == ("Hello there", "stop")
    request = fake.script.requests[-1]
    assert request.max_tokens == 24 and request.sampling.top_k == 100
    assert abs(request.sampling.temperature - 0.75) < 1e-6 and abs(request.sampling.repetition_penalty - 1.05) < 1e-6
    assert request.sampling.repetition_window == 360
    prompt = fake.tokenizer.decode(list(request.prompt_token_ids))
    assert prompt == "[Memory]\nYou: hi\nKoboldAI:"


async def test_stream_sends_kobold_events_then_the_finish(stack):
    client, _ = stack
    response = await client.post("/api/extra/generate/stream", data=orjson.dumps({**LITE, "trim_stop": False}))
    raw = (await response.read()).decode()
    assert response.status == 200 and response.headers["Content-Type"].startswith("text/event-stream")
    events = [block.split("\n") for block in raw.strip().split("\n\n")]
    assert all(lines[0] == "event: message" and lines[1].startswith("data: ") for lines in events)
    data = [orjson.loads(lines[1][6:]) for lines in events]
    assert "".join(d["token"] for d in data) == "Hello there\nYou:"
    assert [d["finish_reason"] for d in data[:-1]] == [None] * (len(data) - 1) and data[-1] == \
        {"token": "", "finish_reason": "stop"}


@pytest.mark.parametrize("field, value", [("mirostat", 3), ("images", ["aGk="])])
async def test_a_sampler_not_served_is_a_400(stack, field, value):
    client, fake = stack
    response = await client.post("/api/v1/generate", data=orjson.dumps({**LITE, field: value}))
    assert response.status == 400 and field in (await response.text())
    assert fake.script.requests == []


async def test_sillytavern_kobold_body_with_singleline(stack):
    """SillyTavern's KoboldAI source (src/endpoints/backends/kobold.js): its settings as sent, singleline true ends the
    output at its first line break."""
    client, _ = stack
    body = {"prompt": "You: hi\nKoboldAI:", "max_context_length": 2048, "max_length": 24, "rep_pen": 1.1,
            "rep_pen_range": 600, "rep_pen_slope": 0, "temperature": 1, "tfs": 1, "top_a": 0, "top_k": 0, "top_p": 0.95,
            "min_p": 0, "typical": 1, "sampler_order": [6, 0, 1, 3, 4, 2, 5], "singleline": True,
            "use_default_badwordsids": False, "mirostat": 0, "mirostat_eta": 0.1, "mirostat_tau": 5, "grammar": "",
            "sampler_seed": -1, "stop_sequence": ["You:"]}
    response = await client.post("/api/v1/generate", data=orjson.dumps(body))
    result = (await response.json())["results"][0]
    assert response.status == 200 and (result["text"], result["finish_reason"]) == ("Hello there", "stop")


async def test_stream_events_hold_no_raw_line_separator(stack):
    """KoboldAI Lite reads each event with /^event: (.*)\\ndata: (.*)(\\r?\\n){2}/m, whose `.` stops at U+2028 and
    U+2029: written raw, the event was never found and the stream stalled; escaped, as KoboldCpp's json.dumps does."""
    client, fake = stack
    fake.script.reply = "a\u2028b\u2029c"
    response = await client.post("/api/extra/generate/stream", data=orjson.dumps({"prompt": "hi", "max_length": 32}))
    raw = await response.read()
    assert "\u2028".encode() not in raw and "\u2029".encode() not in raw
    tokens = [orjson.loads(line[6:])["token"] for line in raw.decode().split("\n") if line.startswith("data: ")]
    assert "".join(tokens) == "a\u2028b\u2029c"


async def test_banned_phrases_are_bad_words(stack):
    """KoboldCpp's banned_tokens (phrases) reach the scheduler as bad words: each phrase's token ids."""
    client, fake = stack
    response = await client.post("/api/v1/generate", data=orjson.dumps({**LITE, "banned_tokens": ["Hello"]}))
    assert response.status == 200
    words = [list(word.ids) for word in fake.script.requests[-1].sampling.bad_words]
    assert fake.tokenizer.encode("Hello").ids in words


async def test_abort_takes_any_body(stack):
    """SillyTavern's KoboldCpp source posts /api/extra/abort with no body when its client leaves (text-completions.js
    abortKoboldCppRequest); KoboldCpp reads a genkey only from a body that parses. With nothing running, KoboldCpp's
    answer for a key it does not run (aborts by genkey: tests/unit/test_kobold_abort.py)."""
    client, _ = stack
    for data in (b"", b"{not json", b'{"genkey": "KCPP1234"}'):
        response = await client.post("/api/extra/abort", data=data)
        assert (response.status, await response.json()) == (200, {"success": "false", "done": "false"})


INSTRUCT = "{{[SYSTEM]}}Be nice.\n{{[INPUT]}}\nhi\n{{[OUTPUT]}}\nhello\n{{[INPUT]}}\nhow?\n{{[OUTPUT]}}\n"


async def test_instruct_placeholders_are_the_chat_templates_tags(stack):
    """KoboldAI Lite's default instruct tags are KoboldCpp's placeholders, which KoboldCpp replaces with the model's
    chat-template tags (replace_instruct_placeholders, true by default; koboldcpp.py transform_genparams): the first
    {{[INPUT]}} opens a user turn, a later one closes the assistant's first, {{[OUTPUT]}} closes the user turn, the
    last one is the generation prompt (thinking off), and a placeholder stop sequence is its tag. They reached the
    model as the literal text "{{[INPUT]}}"."""
    client, fake = stack
    body = {"prompt": INSTRUCT, "max_length": 8, "stop_sequence": ["{{[INPUT]}}", "{{[OUTPUT]}}"]}
    response = await client.post("/api/v1/generate", data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    prompt = fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
    assert prompt == ("<|im_start|>system\nBe nice.\n<|im_start|>user\n\nhi\n<|im_end|>\n<|im_start|>assistant\n"
                      "\nhello\n<|im_end|>\n<|im_start|>user\n\nhow?\n<|im_start|>assistant\n<think>\n\n</think>\n\n\n")


async def test_placeholders_stay_when_not_replaced(stack):
    client, fake = stack
    body = {"prompt": INSTRUCT, "max_length": 8, "replace_instruct_placeholders": False}
    response = await client.post("/api/v1/generate", data=orjson.dumps(body))
    assert response.status == 200
    prompt = fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
    assert prompt == INSTRUCT


@pytest.mark.parametrize("field, value", [("max_length", 0), ("banned_tokens", 5), ("rep_pen", "x"),
                                          ("typical", "x"), ("stop_sequence", 5), ("sampler_seed", "x")])
async def test_a_bad_value_is_named_as_the_client_sent_it(stack, field, value):
    """A 400 names the KoboldAI field the client sent (as every translating route answers in its own API's words),
    not the /v1/completions field it runs as (n_predict, banned_strings, repeat_penalty, ...)."""
    client, fake = stack
    response = await client.post("/api/v1/generate", json={"prompt": "hi", field: value})
    error = (await response.json())["detail"]
    assert response.status == 400 and error["type"] == "bad_input" and re.search(rf"\b{field}\b", error["msg"])
    assert fake.script.requests == []


async def test_the_stream_refuses_more_than_one_generation(stack):
    """KoboldCpp's stream events carry no choice index: n > 1 there is a 400 naming n (it interleaved the choices'
    tokens and sent a finish event for each in one stream); generate answers each in `results`."""
    client, fake = stack
    response = await client.post("/api/extra/generate/stream", json={"prompt": "hi", "n": 2})
    error = orjson.dumps(await response.json()).decode()
    assert response.status == 400 and "n: KoboldCpp's stream carries one generation" in error
    assert fake.script.requests == []
    response = await client.post("/api/v1/generate", json={"prompt": "hi", "n": 2})
    assert response.status == 200 and len((await response.json())["results"]) == 2
