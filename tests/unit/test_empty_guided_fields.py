"""An empty structured-output field ("", {}, []) is no constraint where the server defining it reads it so: vLLM's
guided_* as vLLM <= 0.6 and Aphrodite read them (`if request.guided_json: ... elif request.guided_grammar: ...`),
TabbyAPI's json_schema (its generator adds a schema filter only `if json_schema`) and llama.cpp's grammar (fake
scheduler). SillyTavern's text-completion presets send them on every request (public/scripts/textgen-settings.js
getTextGenGenerationData): its Aphrodite source guided_grammar "" beside guided_json {}, which was a 400 'use one
guided-decoding field, not both guided_json and guided_grammar', its TabbyAPI source json_schema {}, whose answer was
JSON alone."""
import orjson
import pytest

REPLY = "Hello, traveller."
PROMPT = "Write Seraphina's next reply.\nUser: Hello there!\nSeraphina:"
STOP = ["\nUser:", "\nSeraphina:"]
# The fields each SillyTavern source adds to its default preset's body beside the common ones (sent as they are).
COMMON = {"model": "fake-model", "prompt": PROMPT, "max_new_tokens": 40, "max_tokens": 40, "temperature": 0.7,
          "top_p": 0.5, "typical_p": 1, "typical": 1, "sampler_seed": -1, "min_p": 0, "repetition_penalty": 1.2,
          "frequency_penalty": 0, "presence_penalty": 0, "top_k": 40, "skew": 0, "min_tokens": 0,
          "add_bos_token": True, "smoothing_factor": 0, "smoothing_curve": 1, "dry_allowed_length": 2,
          "dry_multiplier": 0, "dry_base": 1.75, "dry_sequence_breakers": '["\\n", ":", "\\"", "*"]',
          "dry_penalty_last_n": 0, "max_tokens_second": 0, "stopping_strings": STOP, "stop": STOP,
          "truncation_length": 4096, "ban_eos_token": False, "skip_special_tokens": True, "top_a": 0, "tfs": 1,
          "mirostat_mode": 0, "mirostat_tau": 5, "mirostat_eta": 0.1, "banned_strings": [],
          "api_server": "http://127.0.0.1:5000", "xtc_threshold": 0.1, "xtc_probability": 0}
APHRODITE = {**COMMON, "api_type": "aphrodite", "custom_token_bans": [], "n": 1, "temperature_last": True,
             "eta_cutoff": 0, "epsilon_cutoff": 0, "ignore_eos": False, "spaces_between_special_tokens": True,
             "guided_grammar": "", "guided_json": {}, "early_stopping": False, "include_stop_str_in_output": False}
TABBY = {**COMMON, "api_type": "tabby", "custom_token_bans": "", "n": 1, "rep_pen": 1.2, "rep_pen_range": 0,
         "repetition_decay": 0, "repetition_penalty_range": 0, "temperature_last": True, "speculative_ngram": False,
         "seed": -1, "guidance_scale": 1, "negative_prompt": "", "grammar_string": "", "json_schema": {},
         "repeat_penalty": 1.2, "tfs_z": 1, "repeat_last_n": 0, "n_predict": 40, "num_predict": 40, "num_ctx": 4096,
         "mirostat": 0, "ignore_eos": False, "rep_pen_slope": 1}
USER = [{"role": "user", "content": "hi"}]


async def post(client, path: str, body: dict) -> tuple[int, bytes]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, await response.read()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("preset", [APHRODITE, TABBY], ids=["aphrodite", "tabby"])
async def test_sillytavern_default_presets_generate_unconstrained(stack, preset, stream):
    client, fake = stack
    fake.script.reply = REPLY
    status, raw = await post(client, "/v1/completions", {**preset, "stream": stream})
    assert status == 200, raw
    assert not fake.script.requests[-1].HasField("constraint")
    if stream:
        events = [orjson.loads(line[6:]) for line in raw.decode().split("\n") if line.startswith("data: {")]
        text = "".join(choice["text"] for event in events for choice in event["choices"])
    else:
        text = orjson.loads(raw)["choices"][0]["text"]
    assert text == REPLY


@pytest.mark.parametrize("path, base", [("/v1/completions", {"prompt": "hi"}),
                                        ("/v1/chat/completions", {"messages": USER}),
                                        ("/completion", {"prompt": "hi"})], ids=["completions", "chat", "llama.cpp"])
@pytest.mark.parametrize("field", [{"guided_json": {}}, {"guided_json": ""}, {"guided_grammar": ""},
                                   {"guided_regex": ""}, {"guided_choice": []}, {"json_schema": {}}],
                         ids=["guided_json {}", "guided_json ''", "guided_grammar", "guided_regex", "guided_choice",
                              "json_schema"])
async def test_an_empty_guided_field_is_no_constraint(stack, path, base, field):
    client, fake = stack
    fake.script.reply = REPLY
    status, raw = await post(client, path, {**base, **field, "max_tokens": 8})
    assert status == 200, raw
    assert not fake.script.requests[-1].HasField("constraint")


async def test_an_empty_guided_field_leaves_the_other_constraint(stack):
    """guided_json {} beside a real guided_regex: the regex is the one constraint, not a 400 for two."""
    client, fake = stack
    status, raw = await post(client, "/v1/completions", {"prompt": "hi", "guided_json": {}, "guided_regex": "[ab]+"})
    assert status == 200, raw
    assert "[ab]+" in fake.script.requests[-1].constraint.grammar


GBNF = 'root ::= "yes" | "no"'


@pytest.mark.parametrize("fields", [{"grammar_string": GBNF}, {"grammar_string": GBNF, "grammar": GBNF},
                                    {"grammar_string": GBNF, "grammar": ""}],
                         ids=["alone", "beside grammar", "beside an empty grammar"])
async def test_grammar_string_is_the_grammar(stack, fields):
    """text-generation-webui's and TabbyAPI's grammar_string is llama.cpp's grammar: SillyTavern sends a user's
    grammar so to those sources (and beside grammar to its llama.cpp source). It was an unknown field, ignored."""
    client, fake = stack
    status, raw = await post(client, "/v1/completions", {"prompt": "hi", "max_tokens": 8, **fields})
    assert status == 200, raw
    assert '"yes"' in fake.script.requests[-1].constraint.grammar
