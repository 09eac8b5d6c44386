"""/v1 and /api/v0 (fake scheduler): llama.cpp server's own request fields, which its OpenAI-compatible routes take as
every /completion option (tools/server/server-task.cpp params_from_json_cmpl), read as llama.cpp reads them instead of
logged as unknown and ignored."""
import orjson
import pytest

REPLY = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10"
USER = [{"role": "user", "content": "hi"}]
ROUTES = [("/v1/chat/completions", {"messages": USER, "enable_thinking": False}),
          ("/v1/completions", {"prompt": "hi"}),
          ("/api/v0/chat/completions", {"messages": USER, "enable_thinking": False}),
          ("/api/v0/completions", {"prompt": "hi"})]
IDS = ["chat", "completions", "lmstudio chat", "lmstudio completions"]


def text_of(body: dict) -> str:
    choice = body["choices"][0]
    return choice["text"] if "text" in choice else choice["message"]["content"]


async def post(client, path: str, body: dict) -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
@pytest.mark.parametrize("fields, text, finish", [
    ({"n_predict": 3}, "1, 2", "length"),
    # llama.cpp's precedence: n_predict over max_completion_tokens over max_tokens.
    ({"n_predict": 3, "max_tokens": 12}, "1, 2", "length"),
    ({"n_predict": -1, "max_tokens": 3}, REPLY, "stop"),
    ({"n_predict": None, "max_tokens": 3}, "1, 2", "length"),
    # llama.cpp's "until the context is filled" (its test_ctx_shift.py::test_n_predict_minus_2; llama.cpp#12264).
    ({"n_predict": -2, "max_tokens": 3}, REPLY, "stop"),
], ids=["limit", "wins-over-max_tokens", "minus-one-is-no-limit", "null-is-absent", "minus-two-fills-the-context"])
async def test_n_predict_is_the_output_limit(stack, path, base, fields, text, finish):
    client, fake = stack
    status, body = await post(client, path, {**base, **fields})
    assert status == 200, body
    assert (text_of(body), body["choices"][0]["finish_reason"]) == (text, finish)
    assert body["usage"]["completion_tokens"] == (20 if finish == "stop" else 3)


@pytest.mark.parametrize("path, base", ROUTES[:2], ids=IDS[:2])
async def test_n_predict_errors_name_it(stack, path, base):
    client, fake = stack
    status, body = await post(client, path, {**base, "n_predict": 0})
    assert (status, body["error"]["param"]) == (400, "n_predict")
    assert body["error"]["message"] == "n_predict must be -1 (no limit), -2 (until the context is full) or at least 1, got 0"
    assert fake.script.requests == []


@pytest.mark.parametrize("path, base", ROUTES[:2], ids=IDS[:2])
async def test_n_predict_past_the_context_runs_until_it_is_full(stack, path, base):
    """llama.cpp's n_predict is a cap: past the room the prompt leaves, the output stops where the context is full
    (its process_token, "stopped due to running out of context"); it was a 400 context_length_exceeded. max_tokens
    past the context stays vLLM's 400."""
    client, fake = stack
    status, body = await post(client, path, {**base, "n_predict": 4096})
    assert status == 200, body
    prompt = body["usage"]["prompt_tokens"]
    assert fake.script.requests[-1].max_tokens == 2048 - prompt
    status, body = await post(client, path, {**base, "max_tokens": 4096})
    assert (status, body["error"]["param"], body["error"]["code"]) == (400, "max_tokens", "context_length_exceeded")


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
async def test_n_probs_returns_each_tokens_most_likely_alternatives(stack, path, base):
    client, fake = stack
    fake.script.top_ids = [5, 6, 7]
    status, body = await post(client, path, {**base, "max_tokens": 2, "n_probs": 2})
    assert status == 200, body
    assert fake.script.requests[-1].sampling.num_logprobs == 2
    logprobs = body["choices"][0]["logprobs"]
    names = [fake.tokenizer.decode([5]), fake.tokenizer.decode([6])]
    if "content" in logprobs:
        assert [entry["token"] for entry in logprobs["content"]] == ["1", ","]
        # Chat's top_logprobs are vLLM's: the chosen token first, then the most likely ones, N in all.
        assert all([top["token"] for top in entry["top_logprobs"]] == [entry["token"]] + names[:1]
                   for entry in logprobs["content"])
    else:
        assert logprobs["tokens"] == ["1", ","]
        assert all(list(top)[1:] == names for top in logprobs["top_logprobs"])
    # OpenAI's logprobs win, as llama.cpp reads n_probs only without them; 0 asks for none.
    openai = {"logprobs": True, "top_logprobs": 1} if "messages" in base else {"logprobs": 1}
    status, body = await post(client, path, {**base, **openai, "max_tokens": 2, "n_probs": 2})
    assert (status, fake.script.requests[-1].sampling.num_logprobs) == (200, 1)
    status, body = await post(client, path, {**base, "max_tokens": 2, "n_probs": 0})
    assert (status, body["choices"][0]["logprobs"]) == (200, None)


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
async def test_logit_bias_takes_llama_cpps_pairs_and_false(stack, path, base):
    """llama.cpp's params_from_json_cmpl takes logit_bias as [[token id or text, bias], ...] (a text biases each of its
    tokens) and a bias of false as 'never sampled'; the list form was a 400 "... is not of type 'object', 'null'"."""
    client, fake = stack
    hello = fake.tokenizer.encode("Hello", add_special_tokens=False).ids
    # 9.0 is JSON Schema's integer 9, the token id (it was tokenized as a text: a 500 TypeError).
    pairs = [[5, 2.5], ["Hello", False], [9.0, -1]]
    status, body = await post(client, path, {**base, "max_tokens": 3, "logit_bias": pairs})
    assert status == 200, body
    assert body["usage"]["completion_tokens"] == 3 and body["choices"][0]["finish_reason"] == "length"
    assert dict(fake.script.requests[-1].sampling.logit_bias) == {5: 2.5, **dict.fromkeys(hello, -100.0), 9: -1.0}
    status, body = await post(client, path, {**base, "max_tokens": 3, "logit_bias": {"7": False}})
    assert (status, dict(fake.script.requests[-1].sampling.logit_bias)) == (200, {7: -100.0})


@pytest.mark.parametrize("bias, message", [
    ([[5]], "invalid value for 'logit_bias[0]': [5] is too short"),
    ([[5, True]], "logit_bias: a bias is a number, or false to ban the token (true means nothing)"),
    ([[10 ** 6, 1]], "logit_bias token id 1000000 is not in [0, "),
    ([[1e6, 1]], "logit_bias token id 1000000 is not in [0, "),
], ids=["not a pair", "true", "past the vocabulary", "integral float past the vocabulary"])
async def test_bad_logit_bias_pairs_are_400s(stack, bias, message):
    client, fake = stack
    status, body = await post(client, "/v1/completions", {"prompt": "hi", "logit_bias": bias})
    assert (status, body["error"]["param"].split("[")[0]) == (400, "logit_bias"), body
    assert body["error"]["message"].startswith(message), body
    assert fake.script.requests == []

@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
async def test_n_cmpl_is_the_number_of_choices(stack, path, base):
    """llama.cpp's n_cmpl is its number of completions, with OpenAI's n as its fallback alias (n_cmpl wins); it was
    logged as unknown and one choice came back where two were asked for."""
    client, fake = stack
    for fields in ({"n_cmpl": 2}, {"n_cmpl": 2, "n": 3}):
        status, body = await post(client, path, {**base, "max_tokens": 3, **fields})
        assert status == 200, body
        assert [choice["index"] for choice in body["choices"]] == [0, 1]
        assert all(choice["finish_reason"] == "length" for choice in body["choices"])
        assert body["usage"]["completion_tokens"] == 6
    status, body = await post(client, path, {**base, "n_cmpl": 0})
    assert (status, body["error"]["param"]) == (400, "n_cmpl"), body
    assert body["error"]["message"] == "n_cmpl must be an integer from 1 to 128, got 0"

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def _json_grammar_schema(grammar: str) -> dict:
    """The schema of a `start: %json{...}` grammar."""
    return orjson.loads(grammar.split("%json", 1)[1])


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
@pytest.mark.parametrize("value", [SCHEMA, orjson.dumps(SCHEMA).decode()], ids=["object", "json-text"])
async def test_json_schema_constrains_the_output(stack, path, base, value):
    client, fake = stack
    status, body = await post(client, path, {**base, "json_schema": value})
    assert status == 200, body
    constraint = fake.script.requests[-1].constraint
    assert '"a"' in constraint.grammar and '"integer"' in constraint.grammar
    # The grammar vLLM's guided_json asks for, but lenient: a keyword it has no rule for is left unenforced, as
    # llama.cpp's json-schema-to-grammar skips it (test_llama_cpp_json_schema_lenient).
    await post(client, path, {**base, "guided_json": SCHEMA})
    guided = _json_grammar_schema(fake.script.requests[-1].constraint.grammar)
    lenient = {**guided, "x-guidance": {**guided["x-guidance"], "lenient": True}}
    assert _json_grammar_schema(constraint.grammar) == lenient


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
async def test_a_gbnf_grammar_constrains_the_output_as_guided_grammar_does(stack, path, base):
    """llama.cpp writes its grammar in GBNF (root ::= ...); it was a 400 'EBNF/GBNF grammars are not supported'. It is
    now llguidance's Lark conversion of it, the grammar vLLM's guided_grammar gets for the same text."""
    client, fake = stack
    status, body = await post(client, path, {**base, "grammar": 'root ::= "yes" | "no"'})
    assert status == 200, body
    assert fake.script.requests[-1].constraint.grammar == '%llguidance {}\n\nstart: "yes"\n     | "no"\n\n'
    await post(client, path, {**base, "guided_grammar": 'root ::= "yes" | "no"'})
    assert fake.script.requests[-1].constraint == fake.script.requests[-2].constraint


@pytest.mark.parametrize("fields, param, message", [
    ({"grammar": 'root ::= "yes" | maybe'}, "grammar",
     "Failed to parse grammar: grammar is not a valid GBNF grammar: Rule 'maybe' not found"),
    ({"json_schema": SCHEMA, "grammar": 'start: "yes"'}, "grammar",
     "use one guided-decoding field, not both json_schema and grammar"),
    ({"json_schema": SCHEMA, "response_format": {"type": "json_object"}}, "json_schema",
     "json_schema cannot be combined with response_format"),
    ({"json_schema": {"type": "nope"}}, "json_schema",
     'json_schema is not a valid JSON Schema: "nope" is not one of ["array", "boolean", "integer", "null", "number", '
     '"object", "string"] (at $.type)'),
], ids=["bad-gbnf", "both", "with-response_format", "bad-schema"])
async def test_constraints_it_cannot_honour_are_400s_naming_the_field(stack, fields, param, message):
    client, fake = stack
    status, body = await post(client, "/v1/chat/completions", {**ROUTES[0][1], **fields})
    assert (status, body["error"]["param"], body["error"]["message"]) == (400, param, message)
    assert fake.script.requests == []


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
@pytest.mark.parametrize("name, value", [("dry_multiplier", 0.8), ("xtc_probability", 0.5), ("top_n_sigma", 1.0),
                                         ("dynatemp_range", 0.5)], ids=["dry", "xtc", "top-n-sigma", "dynatemp"])
async def test_llama_cpps_samplers_are_run_not_refused(stack, path, base, name, value):
    # They were each the 400 "<name>: ... is not supported"; the worker runs them now (worker/dry.py,
    # worker/sampling_chain.py), so each reaches the scheduler as sent.
    client, fake = stack
    status, body = await post(client, path, {**base, "max_tokens": 30, name: value})
    assert (status, text_of(body)) == (200, REPLY)
    assert getattr(fake.script.requests[-1].sampling, name) == pytest.approx(value)


@pytest.mark.parametrize("path, base", ROUTES, ids=IDS)
@pytest.mark.parametrize("window, penalty, sent", [
    (64, 1.3, (1.3, 64)), (-1, 1.3, (1.3, 0)), (0, 1.3, (1.0, 0)), (10 ** 9, 1.3, (1.3, 0)), (None, 1.3, (1.3, 0)),
], ids=["window", "minus-one-is-all", "zero-is-off", "past-the-context-is-all", "absent-is-all"])
async def test_repeat_last_n_is_the_repetition_penaltys_window(stack, path, base, window, penalty, sent):
    client, fake = stack
    status, body = await post(client, path, {**base, "max_tokens": 2, "repeat_penalty": penalty,
                                             "repeat_last_n": window})
    assert status == 200, body
    sampling = fake.script.requests[-1].sampling
    assert (round(sampling.repetition_penalty, 6), sampling.repetition_window) == sent


async def test_repeat_last_n_below_minus_one_is_a_400(stack):
    client, fake = stack
    status, body = await post(client, "/v1/completions", {"prompt": "hi", "repeat_last_n": -2})
    assert (status, body["error"]["param"]) == (400, "repeat_last_n")
    assert body["error"]["message"] == "invalid value for 'repeat_last_n': -2 is less than the minimum of -1"


@pytest.mark.parametrize("path, base", ROUTES[1::2], ids=IDS[1::2])
async def test_post_sampling_probs_with_probabilities_is_a_400(stack, path, base):
    """llama.cpp's post_sampling_probs asks for the probabilities after its sampler chain under other keys (prob,
    top_probs); the raw logprobs under the keys the client did not ask for read as none to it. Served on llama.cpp's
    own /completion and on chat (test_llama_cpp_post_sampling); the completions routes keep OpenAI's logprobs shape."""
    client, fake = stack
    status, body = await post(client, path, {**base, "max_tokens": 2, "n_probs": 2, "post_sampling_probs": True})
    assert (status, body["error"]["param"], body["error"]["code"]) == (400, "post_sampling_probs", "unsupported")
    assert "raw distribution" in body["error"]["message"] and fake.script.requests == []
    # without probabilities it asks for nothing, and false is llama.cpp's default
    for fields in ({"post_sampling_probs": True}, {"n_probs": 2, "post_sampling_probs": False}):
        status, body = await post(client, path, {**base, "max_tokens": 2, **fields})
        assert status == 200, body
