"""SGLang's native POST /generate (fake scheduler), as SGLang's http_server answers it (TokenizerManager.
_handle_batch_output: text, output_ids, meta_info with SGLang's finish_reason objects; a list for a batch; streamed as
`data:` events of the output so far, then [DONE]). It was a 404 'no route /generate', so SGLang's own clients
(bench_serving --backend sglang, RL rollout workers) could not run against this server."""
import orjson
import pytest

REPLY = "1, 2, 3, 4, 5"


async def post(client, body) -> tuple[int, object]:
    response = await client.post("/generate", data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def events(client, body) -> list:
    response = await client.post("/generate", data=orjson.dumps({**body, "stream": True}))
    assert response.status == 200
    lines = [line[6:] for line in (await response.read()).decode().splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [orjson.loads(line) for line in lines[:-1]]


async def test_a_prompt_answers_text_output_ids_and_meta_info(stack):
    client, fake = stack
    status, body = await post(client, {"text": "hi", "sampling_params": {"max_new_tokens": 3, "temperature": 0}})
    assert status == 200, body
    request = fake.script.requests[0]
    assert request.max_tokens == 3 and request.sampling.temperature == 0
    assert body["text"] == "1, 2" and body["output_ids"] == fake.tokenizer.encode(REPLY).ids[:3]
    meta = body["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 3}
    assert (meta["prompt_tokens"], meta["completion_tokens"], meta["cached_tokens"]) == (
        len(request.prompt_token_ids), 3, 0)
    assert len(meta["id"]) == 32 and meta["e2e_latency"] >= 0


async def test_sglangs_default_limit_and_the_end_token_that_matched(stack):
    client, fake = stack
    status, body = await post(client, {"input_ids": [5, 6, 7]})
    assert fake.script.requests[0].max_tokens == 128            # SamplingParams' max_new_tokens, not OpenAI's 16
    assert list(fake.script.requests[0].prompt_token_ids) == [5, 6, 7]
    assert body["text"] == REPLY and body["output_ids"][-1] == fake.eos_id
    assert body["meta_info"]["finish_reason"] == {"type": "stop", "matched": fake.eos_id}


async def test_a_stop_string_is_the_match(stack):
    client, _ = stack
    status, body = await post(client, {"text": "hi", "sampling_params": {"stop": [", 3"], "no_stop_trim": False}})
    assert (body["text"], body["meta_info"]["finish_reason"]) == ("1, 2", {"type": "stop", "matched": ", 3"})


async def test_a_batch_answers_a_list_with_the_rid_per_item(stack):
    client, fake = stack
    status, body = await post(client, {"text": ["a", "b"], "rid": "job", "sampling_params": {"max_new_tokens": 1}})
    assert status == 200 and isinstance(body, list) and len(body) == 2
    assert [item["meta_info"]["id"] for item in body] == ["job_0", "job_1"]
    assert [item["text"] for item in body] == ["1", "1"] and "index" not in body[0]
    status, body = await post(client, {"input_ids": [[5, 6], [7]], "sampling_params": {"max_new_tokens": 1, "n": 2}})
    assert [item["meta_info"]["prompt_tokens"] for item in body] == [2, 2, 1, 1]


async def test_the_stream_sends_the_output_so_far_then_done(stack):
    client, _ = stack
    got = await events(client, {"text": "hi", "rid": "r1", "sampling_params": {"max_new_tokens": 3}})
    assert [e["text"] for e in got] == ["1", "1,", "1, 2"]
    assert [len(e["output_ids"]) for e in got] == [1, 2, 3]
    assert [e["meta_info"]["finish_reason"] for e in got] == [None, None, {"type": "length", "length": 3}]
    assert {e["meta_info"]["id"] for e in got} == {"r1"} and "index" not in got[0]
    assert ["e2e_latency" in e["meta_info"] for e in got] == [False, False, True]
    got = await events(client, {"text": ["a", "b"], "sampling_params": {"max_new_tokens": 1}})
    assert sorted(e["index"] for e in got) == [0, 1]


async def test_logprobs_are_sglangs_triples(stack):
    client, fake = stack
    fake.script.top_ids = [9, 8]
    status, body = await post(client, {"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 2},
                                       "return_logprob": True, "top_logprobs_num": 2, "logprob_start_len": 1,
                                       "return_text_in_logprobs": True})
    meta = body["meta_info"]
    ids = body["output_ids"]
    text = fake.tokenizer.id_to_token
    assert meta["output_token_logprobs"] == [[-0.5, ids[0], "1"], [-0.5, ids[1], ","]]
    assert [t[1] for t in meta["output_top_logprobs"][0]] == [9, 8]
    # The prompt from position 1 on: its first entry null, as SGLang pads the window wherever it starts ([None] + its
    # rows, scheduler._process_input_token_logprobs), then the scripted -0.1 * position, alternatives ids 0 and 1.
    # It was the position's own logprob (-0.1), which SGLang's RuntimeEndpoint.select averaged in where SGLang has none.
    assert meta["input_token_logprobs"] == [[None, 6, text(6)], [pytest.approx(-0.2), 7, text(7)]]
    assert meta["input_top_logprobs"][0] is None and [t[1] for t in meta["input_top_logprobs"][1]] == [0, 1]
    # Without logprob_start_len, SGLang's window is the last prompt token alone, its logprob null (the scheduler sets
    # len - 1); it was an empty list.
    status, body = await post(client, {"text": "hi", "return_logprob": True, "sampling_params": {"max_new_tokens": 1}})
    last = list(fake.script.requests[-1].prompt_token_ids)[-1]
    assert body["meta_info"]["input_token_logprobs"] == [[None, last, None]]
    assert "output_top_logprobs" not in body["meta_info"] and body["meta_info"]["output_token_logprobs"][0][2] is None


async def test_max_new_tokens_zero_reads_the_prompt_only(stack):
    client, fake = stack
    status, body = await post(client, {"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 0}})
    assert status == 200, body
    assert (body["text"], body["output_ids"]) == ("", [])
    assert body["meta_info"]["finish_reason"] == {"type": "length", "length": 0}
    assert body["meta_info"]["prompt_tokens"] == 3 and not fake.script.requests
    status, body = await post(client, {"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 0},
                                       "return_logprob": True, "logprob_start_len": 0})
    assert (body["text"], body["output_ids"], body["meta_info"]["completion_tokens"]) == ("", [], 0)
    assert [t[:2] for t in body["meta_info"]["input_token_logprobs"]] == [[None, 5], [pytest.approx(-0.1), 6],
                                                                          [pytest.approx(-0.2), 7]]


@pytest.mark.parametrize("body,param,words", [
    ({"sampling_params": {"max_new_tokens": 2}}, "text", "Either text, input_ids or input_embeds"),
    ({"text": "a", "input_ids": [1]}, "text", "Either text, input_ids or input_embeds"),
    ({"text": "a", "sampling_params": {"max_new_token": 2}}, "sampling_params.max_new_token", "unknown"),
    ({"text": "a", "image_data": "x.png"}, "image_data", "text-only"),
], ids=["no-prompt", "both", "misspelt-param", "image"])
async def test_a_bad_body_is_a_400_naming_the_field(stack, body, param, words):
    client, fake = stack
    status, got = await post(client, body)
    assert status == 400 and got["error"]["param"] == param and words in got["error"]["message"], got
    assert not fake.script.requests


async def test_errors_name_sglangs_fields(stack):
    client, fake = stack
    status, body = await post(client, {"text": "a", "sampling_params": {"max_new_tokens": -1}})
    assert (status, body["error"]["param"]) == (400, "sampling_params.max_new_tokens")
    assert body["error"]["message"] == "max_new_tokens must be at least 0, got -1."
    status, body = await post(client, {"text": "a", "sampling_params": {"temperature": -1, "max_new_tokens": 1}})
    assert (status, body["error"]["param"]) == (400, "sampling_params.temperature")
    status, body = await post(client, {"input_ids": [5, 99999]})
    assert (status, body["error"]["param"]) == (400, "input_ids")


async def test_null_sampling_params_take_sglangs_defaults(stack):
    client, fake = stack
    nulls = {key: None for key in ("n", "temperature", "top_p", "top_k", "min_p", "stop", "stop_token_ids",
                                   "json_schema", "regex", "ebnf", "structural_tag", "ignore_eos", "no_stop_trim",
                                   "logit_bias", "min_new_tokens", "frequency_penalty", "skip_special_tokens")}
    status, body = await post(client, {"text": "hi", "sampling_params": {"max_new_tokens": 2, **nulls}})
    assert status == 200, body
    assert body["text"] == "1," and fake.script.requests[0].constraint.kind == ""


@pytest.mark.parametrize("body,message", [
    ({"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 5000}},
     "Requested token count exceeds the model's maximum context length of 2048 tokens. You requested a total of 5003 "
     "tokens: 3 tokens from the input messages and 5000 tokens for the completion. Please reduce the number of tokens "
     "in the input messages or the completion to fit within the limit."),
    ({"input_ids": [5] * 2000, "sampling_params": {"max_new_tokens": 49}},
     "Requested token count exceeds the model's maximum context length of 2048 tokens. You requested a total of 2049 "
     "tokens: 2000 tokens from the input messages and 49 tokens for the completion. Please reduce the number of "
     "tokens in the input messages or the completion to fit within the limit."),
    ({"input_ids": [5] * 2048, "sampling_params": {"max_new_tokens": 1}},
     "The input (2048 tokens) is longer than the model's context length (2048 tokens)."),
    ({"input_ids": [5] * 3000}, "The input (3000 tokens) is longer than the model's context length (2048 tokens)."),
], ids=["limit-past-the-room", "one-past", "input-fills-the-context", "input-past-it"])
async def test_a_request_past_the_context_is_sglangs_400_in_its_words(stack, body, message):
    """SGLang's TokenizerManager._validate_one_request refuses an input that fills the context and a max_new_tokens
    sent past the room the input leaves (allow_auto_truncate off, its default), before the scheduler sees it."""
    client, fake = stack
    status, got = await post(client, body)
    assert status == 400 and got["error"]["message"] == message, got
    assert got["error"]["param"] == ("sampling_params.max_new_tokens" if "Requested" in message else "input_ids")
    assert not fake.script.requests


async def test_the_default_limit_and_an_exact_fit_are_served(stack):
    """SGLang's default max_new_tokens (128, not sent) is capped at the room the input leaves
    (Scheduler.init_req_max_new_tokens); a limit that fits exactly is served as sent."""
    client, fake = stack
    status, body = await post(client, {"input_ids": [5] * 2000})
    assert status == 200 and fake.script.requests[0].max_tokens == 48, body
    status, body = await post(client, {"input_ids": [5] * 2000, "sampling_params": {"max_new_tokens": 48}})
    assert status == 200 and fake.script.requests[1].max_tokens == 48, body


async def test_min_new_tokens_holds_off_only_the_end_tokens_not_stop_strings(stack):
    """SGLang's min_new_tokens masks the eos and stop_token_ids (its BatchedMinNewTokensPenalizer), while
    Req.check_finished matches stop strings from the first token on; vLLM's min_tokens (the /v1 reading) holds stop
    strings off too. This route answered the text past the stop string, finish length."""
    client, fake = stack
    fake.script.token_ids = [fake.tokenizer.token_to_id(t) for t in ("A", "B", "C", "C")]
    body = {"text": "hi", "sampling_params": {"max_new_tokens": 4, "min_new_tokens": 3, "stop": ["AB"]}}
    status, answer = await post(client, body)
    assert status == 200 and fake.script.requests[-1].sampling.min_tokens == 3
    assert (answer["text"], answer["meta_info"]["finish_reason"]) == ("", {"type": "stop", "matched": "AB"})
    assert (await events(client, body))[-1]["meta_info"]["finish_reason"] == {"type": "stop", "matched": "AB"}


async def test_return_prompt_token_ids_puts_the_prompts_ids_in_every_answer(stack):
    # SGLang's TokenizerManager adds prompt_token_ids to each answer dict (streamed events too) when asked; RL
    # recorders read the prompt's tokens there. It was dropped: the answers had no prompt_token_ids.
    client, fake = stack
    status, body = await post(client, {"text": ["a", "bc"], "return_prompt_token_ids": True,
                                       "sampling_params": {"max_new_tokens": 1}})
    assert status == 200, body
    assert [item["prompt_token_ids"] for item in body] == [list(r.prompt_token_ids) for r in fake.script.requests]
    got = await events(client, {"input_ids": [5, 6, 7], "return_prompt_token_ids": True,
                                "sampling_params": {"max_new_tokens": 2}})
    assert [e["prompt_token_ids"] for e in got] == [[5, 6, 7]] * len(got) and len(got) == 2
    status, body = await post(client, {"input_ids": [5, 6], "sampling_params": {"max_new_tokens": 0},
                                       "return_prompt_token_ids": True})
    assert body["prompt_token_ids"] == [5, 6] and body["output_ids"] == []
    status, body = await post(client, {"input_ids": [5, 6], "sampling_params": {"max_new_tokens": 1}})
    assert "prompt_token_ids" not in body


@pytest.mark.parametrize("extra", [
    {"token_ids_logprob": [1, 2], "return_logprob": True},
    {"return_sampling_mask": True, "return_logprob": True},
    {"return_flat_raw_top_logprobs": True, "return_logprob": True, "top_logprobs_num": 2},
    {"return_entropy": True},
    {"return_indexer_topk": True},
    {"max_thinking_tokens": 8},
], ids=["token_ids_logprob", "sampling_mask", "flat_raw_top_logprobs", "entropy", "indexer_topk", "thinking_budget"])
async def test_fields_whose_answer_is_not_given_are_a_400_naming_them(stack, extra):
    # Each changes SGLang's answer (meta_info's input/output_token_ids_logprobs, the flat arrays, the entropy, ...);
    # they were taken and dropped, the answer silently without them.
    client, fake = stack
    status, got = await post(client, {"text": "hi", "sampling_params": {"max_new_tokens": 1}, **extra})
    field = next(iter(extra))
    assert status == 400 and got["error"]["param"] == field and got["error"]["code"] == "unsupported", got
    assert got["error"]["message"].startswith(f"{field}: ")
    assert not fake.script.requests


async def test_token_ids_logprob_without_return_logprob_and_false_flags_change_nothing(stack):
    # SGLang returns the chosen ids' logprobs only with return_logprob; a flag sent false asks for nothing.
    client, _ = stack
    status, body = await post(client, {"text": "hi", "token_ids_logprob": [1], "return_entropy": False,
                                       "max_thinking_tokens": None, "sampling_params": {"max_new_tokens": 1}})
    assert status == 200 and body["text"] == "1", body


async def test_a_logprob_start_len_at_the_prompts_end_is_sglangs_400(stack):
    # SGLang's scheduler aborts it as a BadRequestError (handle_generate_request); it was a 200 with an empty window.
    client, fake = stack
    status, got = await post(client, {"input_ids": [[5, 6, 7], [8]], "return_logprob": True, "logprob_start_len": 1,
                                      "sampling_params": {"max_new_tokens": 1}})
    assert status == 400 and got["error"]["param"] == "logprob_start_len", got
    assert "len(req.origin_input_ids)=1" in got["error"]["message"] and not fake.script.requests
    # A prompt-only request reads no window by default (SGLang's prefill-only requests skip it).
    status, body = await post(client, {"input_ids": [5, 6], "return_logprob": True,
                                       "sampling_params": {"max_new_tokens": 0}})
    assert status == 200 and body["meta_info"]["input_token_logprobs"] == [], body


@pytest.mark.parametrize("temperature", [2.5, 5, 100])
async def test_a_temperature_above_openais_2_is_taken_as_sglang_takes_it(stack, temperature):
    """SGLang's SamplingParams.verify bounds the temperature below only (non-negative, finite); min_p with a high
    temperature is a common setting. It was /v1's 400 "2.5 is greater than the maximum of 2"."""
    client, fake = stack
    params = {"temperature": temperature, "min_p": 0.1, "max_new_tokens": 2}
    status, body = await post(client, {"text": "hi", "sampling_params": params})
    assert status == 200, body
    assert fake.script.requests[-1].sampling.temperature == temperature
    assert body["meta_info"]["completion_tokens"] == 2
