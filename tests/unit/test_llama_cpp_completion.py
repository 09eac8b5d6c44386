"""POST /completion (fake scheduler) answers in llama.cpp server's own shape (its README 'POST /completion';
tools/server/server-task.cpp to_json_non_oaicompat, server-context.cpp send_final_response): it was a 404
'no route /completion', the route every llama.cpp client of the non-OpenAI API calls."""
from types import SimpleNamespace

import grpc
import orjson
import pytest

from gateway import llama_cpp_shape
from gateway.engine import GenRequest

REPLY = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10"


async def post(client, body) -> tuple[int, object]:
    response = await client.post("/completion", data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def events(client, body) -> list:
    response = await client.post("/completion", data=orjson.dumps({**body, "stream": True}))
    assert response.status == 200
    text = (await response.read()).decode()
    assert "[DONE]" not in text    # llama.cpp ends this route's stream with the final object, no [DONE]
    return [orjson.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


async def test_a_completion_is_llama_cpps_result_object(stack):
    client, fake = stack
    status, body = await post(client, {"prompt": "hi", "n_predict": 3, "return_tokens": True, "cache_prompt": True})
    assert status == 200, body
    assert (body["content"], body["stop"], body["stop_type"], body["stopping_word"]) == ("1, 2", True, "limit", "")
    num_prompt = len(fake.script.requests[0].prompt_token_ids)
    assert (body["tokens_predicted"], body["tokens_evaluated"], body["prompt"]) == (3, num_prompt, "hi")
    assert len(body["tokens"]) == 3
    assert body["generation_settings"]["n_predict"] == 3 and body["generation_settings"]["n_ctx"] == 2048
    assert body["model"] == "fake-model" and body["truncated"] is False
    assert (body["timings"]["predicted_n"], body["timings"]["prompt_n"]) == (3, num_prompt)


async def test_without_n_predict_there_is_no_limit_and_eos_is_eos(stack):
    client, fake = stack
    status, body = await post(client, {"prompt": "hi"})
    assert (status, body["content"], body["stop_type"], body["tokens"]) == (200, REPLY, "eos", [])
    assert body["generation_settings"]["n_predict"] == -1 and fake.script.requests[0].max_tokens > 16


async def test_a_stop_word_is_named(stack):
    client, fake = stack
    status, body = await post(client, {"prompt": "hi", "stop": [", 4"]})
    assert (body["content"], body["stop_type"], body["stopping_word"]) == ("1, 2, 3", "word", ", 4")


async def test_the_stream_sends_partials_then_the_final_object(stack):
    client, fake = stack
    got = await events(client, {"prompt": "hi", "n_predict": 3, "n_probs": 1})
    partials, final = got[:-1], got[-1]
    assert "".join(p["content"] for p in partials) == "1, 2"
    assert all(p["stop"] is False and len(p["tokens"]) == 1 for p in partials)
    assert [p["tokens_predicted"] for p in partials] == [1, 2, 3]
    assert all(len(p["completion_probabilities"]) == 1 for p in partials)
    assert (final["stop"], final["content"], final["tokens"], final["stop_type"]) == (True, "", [], "limit")
    assert final["tokens_predicted"] == 3


@pytest.mark.parametrize("prompt, count", [
    (["hi", "yo"], 2),
    ([[5, 6], "yo"], 2),
    # llama.cpp's mixed prompt (tokenize_mixed): one prompt of token ids and text
    ([5, "yo", 6], 1),
], ids=["strings", "ids-and-string", "mixed-is-one-prompt"])
async def test_prompt_forms(stack, prompt, count):
    client, fake = stack
    status, body = await post(client, {"prompt": prompt, "n_predict": 2})
    assert status == 200, body
    bodies = body if isinstance(body, list) else [body]
    assert [b["index"] for b in bodies] == list(range(count))
    assert all(b["content"] == "1," for b in bodies)
    if prompt == [5, "yo", 6]:
        ids = fake.script.requests[0].prompt_token_ids
        assert ids[0] == 5 and ids[-1] == 6 and len(ids) > 2


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_each_choice_of_n_cmpl_counts_its_own_prompt(stack, stream):
    client, fake = stack
    body = {"prompt": ["hi", "a longer prompt"], "n_cmpl": 2, "n_predict": 2}
    if stream:
        finals = [e for e in await events(client, body) if e["stop"]]
    else:
        status, finals = await post(client, body)
    lengths = sorted({len(r.prompt_token_ids) for r in fake.script.requests})   # "hi" is the shorter
    got = sorted((f["index"], f["tokens_evaluated"], f["prompt"]) for f in finals)
    assert got == [(0, lengths[0], "hi"), (1, lengths[0], "hi"), (2, lengths[1], "a longer prompt"),
                   (3, lengths[1], "a longer prompt")]


@pytest.mark.parametrize("body, param", [
    ({"n_predict": 2}, "prompt"),
    ({"prompt": [{"prompt_string": "x", "multimodal_data": ["AA=="]}]}, "prompt[0].multimodal_data"),
], ids=["no-prompt", "multimodal"])
async def test_bad_requests_are_400s_naming_the_field(stack, body, param):
    client, fake = stack
    status, got = await post(client, body)
    assert (status, got["error"]["param"]) == (400, param)
    assert fake.script.requests == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_response_fields_keep_only_the_fields_named(stack, stream):
    """llama.cpp's response_fields (json_get_nested_values): the final object holds only those fields, a nested one
    under its whole path; a path that names nothing is left out."""
    client, fake = stack
    body = {"prompt": "hi", "n_predict": 3, "response_fields": ["content", "generation_settings/n_predict", "nope/x"]}
    if stream:
        final = (await events(client, body))[-1]
        assert final == {"content": "", "generation_settings/n_predict": 3}
    else:
        status, final = await post(client, body)
        assert (status, final) == (200, {"content": "1, 2", "generation_settings/n_predict": 3})
    status, got = await post(client, {**body, "response_fields": "content"})
    assert (status, got["error"]["param"]) == (400, "response_fields")


async def test_errors_come_in_llama_cpps_shape(stack):
    """llama.cpp's error object on its own routes (server-common.cpp format_error_response): the HTTP status as the
    code and its type names; a prompt past the context is its exceed_context_size_error with the counts."""
    client, fake = stack
    status, body = await post(client, {"n_predict": 2})
    assert (status, body["error"]["code"], body["error"]["type"]) == (400, 400, "invalid_request_error")
    assert body["error"]["message"] == "'prompt' is a required property"
    status, body = await post(client, {"prompt": "hi " * 3000})
    assert (status, body["error"]["code"], body["error"]["type"]) == (400, 400, "exceed_context_size_error")
    assert body["error"]["n_ctx"] == 2048 and body["error"]["n_prompt_tokens"] >= 2048
    # llama.cpp's words (server-context.cpp), which agents parse for the window: hermes-agent PR #89504.
    assert body["error"]["message"] == (f"request ({body['error']['n_prompt_tokens']} tokens) exceeds the available "
                                        "context size (2048 tokens), try increasing it")
    fake.script.error = grpc.StatusCode.UNAVAILABLE
    status, body = await post(client, {"prompt": "hi", "n_predict": 2})
    assert (status, body["error"]["code"], body["error"]["type"]) == (503, 503, "unavailable_error")
    fake.script.error, fake.script.max_running = None, 0
    response = await client.post("/completion", data=orjson.dumps({"prompt": "hi", "n_predict": 2}))
    body = orjson.loads(await response.read())
    assert (response.status, body["error"]["type"], response.headers["Retry-After"]) == (429, "unavailable_error", "1")


def test_timings_leave_the_time_queued_out_of_the_prompt(monkeypatch):
    """llama.cpp's timings.prompt_ms runs from when its slot starts on the prompt; a request that waited 2.5 s for a
    seat had those seconds counted as prompt time (prompt_per_second read 0.86 tokens/s on a busy stack)."""
    gen = SimpleNamespace(started_at=100.0, first_token_at=103.0, queue_time=2.5)
    plan = SimpleNamespace(gen=GenRequest(req_id="r", prompt_ids=[1, 2, 3, 4, 5], max_tokens=8), stream=False,
                           model="m")
    card = SimpleNamespace(max_context_len=64)
    shaper = llama_cpp_shape.LlamaCppShaper(plan, card, 8, gen)
    monkeypatch.setattr(llama_cpp_shape.time, "monotonic", lambda: 105.0)
    timings = shaper.timings(prompt_n=5, cached=0, predicted_n=4)
    assert (timings["prompt_n"], timings["prompt_ms"], timings["prompt_per_second"]) == (5, 500.0, 10.0)
    assert (timings["predicted_n"], timings["predicted_ms"], timings["predicted_per_second"]) == (4, 2000.0, 2.0)


async def test_a_whole_answer_leaves_the_stop_words_probabilities_out(stack):
    # llama.cpp's send_final_response (PR #2849, "avoid antiprompt in probabilities of final response") drops as many
    # entries as the stopping word has tokens: the answer's probabilities were those of "1, 2, 3, 4", past its content.
    client, fake = stack
    status, body = await post(client, {"prompt": "hi", "stop": [", 4"], "n_probs": 1, "return_tokens": True})
    word = len(fake.tokenizer.encode(", 4", add_special_tokens=False).ids)
    assert (status, body["content"], body["stop_type"]) == (200, "1, 2, 3", "word")
    probs = body["completion_probabilities"]
    assert len(probs) == len(body["tokens"]) - word
    assert "".join(p["token"] for p in probs) == "1, 2, 3"
    # The stream sent every token's entry with its partials (llama.cpp trims only the whole answer).
    got = await events(client, {"prompt": "hi", "stop": [", 4"], "n_probs": 1})
    streamed = [p["token"] for e in got[:-1] for p in e.get("completion_probabilities", [])]
    assert len(streamed) == len(body["tokens"]) and "".join(streamed).startswith("1, 2, 3")


@pytest.mark.parametrize("reply, expected", [("1,\n2", True), ("1, 2", False)], ids=["newline", "none"])
async def test_has_new_line_counts_the_text_a_stream_sent(stack, reply, expected):
    """llama.cpp's slot.has_new_line is set by any text_to_send with a newline, so a stream's final object (content
    "", the text already sent) says so too; it was false whatever the stream had sent."""
    client, fake = stack
    fake.script.reply = reply
    streamed = await events(client, {"prompt": "hi"})
    assert "".join(event["content"] for event in streamed) == reply
    assert streamed[-1]["stop"] is True and streamed[-1]["has_new_line"] is expected
    status, whole = await post(client, {"prompt": "hi"})
    assert status == 200 and whole["has_new_line"] is expected


@pytest.mark.parametrize("per_token", [True, False], ids=["timings_per_token", "default"])
async def test_timings_per_token_puts_the_timings_so_far_in_each_partial(stack, per_token):
    """llama.cpp's timings_per_token: each streamed partial carries `timings` (server-task.cpp
    to_json_non_oaicompat); the flag was dropped as changing nothing, so only the final object had them."""
    client, fake = stack
    got = await events(client, {"prompt": "hi", "n_predict": 3, "timings_per_token": per_token})
    partials, final = got[:-1], got[-1]
    if per_token:
        assert [p["timings"]["predicted_n"] for p in partials] == [1, 2, 3]
        assert all(p["timings"]["prompt_n"] + p["timings"]["cache_n"] == p["tokens_evaluated"] for p in partials)
    else:
        assert all("timings" not in p for p in partials)
    assert final["timings"]["predicted_n"] == 3


@pytest.mark.parametrize("fields, settings", [
    ({"top_p": 0, "top_k": 1, "temperature": 0}, {"top_k": 1, "temperature": 0.0}),
    ({"top_p": 1.5, "min_p": 2, "top_k": -5, "temperature": -1, "typical_p": 1.5},
     {"top_p": 1.0, "min_p": 1.0, "temperature": 0.0, "typical_p": 1.0}),
], ids=["sillytavern-deterministic", "out-of-range"])
async def test_sampling_values_are_clamped_into_llama_cpps_ranges(stack, fields, settings):
    """llama.cpp clamps these (tools/server/server-schema.cpp field_num set_limits) and its top_p 0 keeps the most
    likely token; SillyTavern's Deterministic preset (top_p 0, top_k 1, temp 0) was a 400 "0 is less than or equal
    to the minimum of 0", and so was any value past a range."""
    client, fake = stack
    status, body = await post(client, {"prompt": "hi", "n_predict": 2, **fields})
    assert status == 200, body
    echoed = body["generation_settings"]
    assert {name: echoed[name] for name in settings} == settings
    sent = fake.script.requests[0].sampling
    assert 0 < sent.top_p < 1e-6 if fields["top_p"] == 0 else sent.top_p == 1.0


async def test_return_progress_streams_the_prompt_progress_before_the_text(stack):
    """llama.cpp's return_progress: a partial with prompt_progress {total, cache, processed, time_ms} before the text
    (server-context.cpp send_partial_response with is_progress); the flag was dropped as changing nothing."""
    client, fake = stack
    got = await events(client, {"prompt": "hi", "n_predict": 2, "return_progress": True})
    first, rest = got[0], got[1:]
    total = first["tokens_evaluated"]
    assert (first["content"], first["tokens_predicted"], first["stop"]) == ("", 0, False)
    progress = first["prompt_progress"]
    assert (progress["total"], progress["processed"], progress["cache"]) == (total, total, 0)
    assert progress["time_ms"] >= 0 and all("prompt_progress" not in e for e in rest)
    assert "".join(e["content"] for e in rest) == "1,"
