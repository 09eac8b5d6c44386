"""Unit: Ollama `options` and `think` -> sampling, context window and generation budget (no sockets)."""
import asyncio

import pytest

from gateway.errors import ContextLengthExceeded, InvalidRequest
from gateway.fake_scheduler import FakeServing, build_tokenizer
from gateway.model import ModelCard
from gateway.ollama_options import _number, generation_budget, parse_options, thinking_kwargs
from gateway.once_log import MAX_SHOWN


@pytest.fixture(scope="module")
def card() -> ModelCard:
    info = asyncio.run(FakeServing(build_tokenizer(), max_context_len=2048).Info(None, None))
    return ModelCard.from_info(info)


def test_defaults_come_from_generation_config(card):
    opts = parse_options(None, card)
    assert opts.num_ctx == 2048 and opts.num_predict is None and opts.stop == []
    # The fake model's generation_config sets temperature 0.7; the rest are neutral.
    s = opts.sampling
    assert (s.temperature, s.top_p, s.top_k, s.min_p, s.seed) == (0.7, 1.0, 0, 0.0, None)
    assert (s.repetition_penalty, s.presence_penalty, s.frequency_penalty) == (1.0, 0.0, 0.0)


def test_every_sampling_option_maps(card):
    opts = parse_options({"temperature": 0, "top_k": 40, "top_p": 0.9, "min_p": 0.05, "seed": 42,
                          "stop": ["\n\n", ""], "num_predict": 128, "num_ctx": 1024, "repeat_penalty": 1.1,
                          "presence_penalty": 0.5, "frequency_penalty": -0.5, "num_thread": 8, "use_mmap": True},
                         card)
    s = opts.sampling
    assert (s.temperature, s.top_k, s.top_p, s.min_p, s.seed) == (0, 40, 0.9, 0.05, 42)
    assert (s.repetition_penalty, s.presence_penalty, s.frequency_penalty) == (1.1, 0.5, -0.5)
    assert (opts.num_predict, opts.num_ctx, opts.stop) == (128, 1024, ["\n\n"])


# Ollama's runner limits a sequence only when numPredict > 0: 0 and every negative value mean "until the window
# is full" (ollama/ollama#7814: -1 infinite, -2 fill the context), never a 400.
@pytest.mark.parametrize("value,expected", [(-1, None), (-2, None), (0, None), (-5, None), (1, 1), (7.0, 7)],
                         ids=str)
def test_num_predict_values(card, value, expected):
    assert parse_options({"num_predict": value}, card).num_predict == expected


@pytest.mark.parametrize("value,expected", [(2**40, 0), (2**63 - 1, 0), (1e18, 0), (-3, 0), (40, 40)], ids=str)
def test_top_k_past_the_vocabulary_is_off(card, value, expected):
    # A top_k of 2**40 reached the scheduler's int32 field and failed the generation with a 500.
    assert parse_options({"top_k": value}, card).sampling.top_k == expected


def test_negative_seed_is_random(card):
    opts = parse_options({"seed": -1, "stop": ["END"]}, card)
    assert opts.sampling.seed is None and opts.stop == ["END"]


@pytest.mark.parametrize("options, penalty, window", [
    ({"repeat_penalty": 1.3}, 1.3, 64),
    ({"repeat_penalty": 1.3, "repeat_last_n": 64}, 1.3, 64),
    ({"repeat_penalty": 1.1, "repeat_last_n": 256}, 1.1, 256),
    ({"repeat_penalty": 1.3, "repeat_last_n": -1}, 1.3, 0),
    ({"repeat_penalty": 1.3, "repeat_last_n": 0}, 1.0, 0),
    ({"repeat_penalty": 1.3, "repeat_last_n": 2048}, 1.3, 0),
    ({"repeat_penalty": 1.3, "repeat_last_n": 2**31}, 1.3, 0),
], ids=["unset is 64", "64", "256", "-1 is the whole context", "0 disables", "the context is all of it",
        "past int32 is all of it"])
def test_repeat_last_n_is_the_penalty_window(card, options, penalty, window):
    """Ollama's repeat_last_n (default 64): the penalty looks at the last N prompt+output tokens. Any window but -1
    was a 400 'repeat_last_n=64 is not supported', so clients that send Ollama's own default failed."""
    s = parse_options(options, card).sampling
    assert (s.repetition_penalty, s.repetition_window) == (penalty, window)


def test_fractional_integer_options_are_truncated_as_ollama_reads_them(card):
    """Ollama's Options.FromMap sets an int field from any JSON number (int64(f), toward zero); 2.5 was a 400."""
    options = parse_options({"num_predict": 2.5, "top_k": 5.9, "seed": 7.2, "num_ctx": 64.7}, card)
    assert (options.num_predict, options.sampling.top_k, options.sampling.seed, options.num_ctx) == (2, 5, 7, 64)


BAD = [
    ({"num_predict": "2"}, InvalidRequest, '^option "num_predict" must be of type integer$'),
    ({"num_ctx": -1}, InvalidRequest, "num_ctx' must be a positive integer"),
    ({"temperature": "hot"}, InvalidRequest, '^option "temperature" must be of type float32$'),
    ({"temperature": True}, InvalidRequest, '^option "temperature" must be of type float32$'),
    ({"top_k": [2]}, InvalidRequest, '^option "top_k" must be of type integer$'),
    ({"presence_penalty": 3}, InvalidRequest, "presence_penalty"),
    # The server's own bounds past Ollama's (the float32 wire's temperature range, vLLM's penalties).
    ({"temperature": 100.5}, InvalidRequest, r"'temperature' must be in \[0.0, 100.0\]"),
    ({"repeat_penalty": 101}, InvalidRequest, "repeat_penalty"),
    ({"stop": [1, 2]}, InvalidRequest, '^option "stop" must be of an array of strings$'),
    ({"stop": "END"}, InvalidRequest, '^option "stop" must be of type array$'),
    ({"use_mmap": "yes"}, InvalidRequest, '^option "use_mmap" must be of type boolean$'),
]


@pytest.mark.parametrize("options,error,message", BAD, ids=[next(iter(b[0])) + "=" + repr(next(iter(b[0].values())))
                                                              for b in BAD])
def test_bad_options_are_400_with_the_option_named(card, options, error, message):
    with pytest.raises(error, match=message) as info:
        parse_options(options, card)
    assert info.value.status == 400
    assert info.value.param == f"options.{next(iter(options))}"


CLAMPED = [({"temperature": -0.1}, "temperature", 0.0), ({"temperature": -5}, "temperature", 0.0),
           ({"top_p": 1.5}, "top_p", 1.0), ({"min_p": 2}, "min_p", 1.0), ({"min_p": -0.5}, "min_p", 0.0),
           ({"repeat_penalty": 0}, "repetition_penalty", 1.0), ({"repeat_penalty": -2}, "repetition_penalty", 1.0),
           ({"repeat_penalty": 0.005}, "repetition_penalty", 0.005), ({"typical_p": 1.5}, "typical_p", 1.0)]


@pytest.mark.parametrize("options, name, served", CLAMPED, ids=[f"{k}={v}" for (o, _, _) in CLAMPED
                                                                for k, v in o.items()])
def test_a_sampling_option_past_its_range_is_clamped_as_ollamas_sampler_does(card, options, name, served):
    """Ollama's sampler (sample/samplers.go NewSampler) holds a negative temperature at 0 (greedy), top_p and min_p
    in [0, 1], and reads a repeat_penalty of 0 or less as 1 (off); Ollama answers such a request, where this was a 400
    "option 'top_p' must be in [0.0, 1.0]" (clients that send Ollama's values, repeat_penalty 0 for "off", failed)."""
    assert getattr(parse_options(options, card).sampling, name) == pytest.approx(served)


def test_top_p_below_zero_keeps_the_most_likely_token_as_top_p_zero(card):
    assert parse_options({"top_p": -1}, card).sampling.top_p == parse_options({"top_p": 0}, card).sampling.top_p


def test_unknown_options_are_ignored_with_a_warning_like_ollama(card, caplog):
    with caplog.at_level("WARNING", logger="sparkinfer.gateway"):
        opts = parse_options({"num_gqa": 8, "foo": {"x": 1}, "temperature": 0.5}, card)
    assert opts.sampling.temperature == 0.5
    assert "ignoring unknown Ollama option 'num_gqa'" in caplog.text
    assert "ignoring unknown Ollama option 'foo'" in caplog.text


def test_num_ctx_above_the_model_is_the_models_window_as_ollama_clamps_it(card, caplog):
    with caplog.at_level("WARNING", logger="sparkinfer.gateway"):
        opts = parse_options({"num_ctx": 262144}, card)
    assert opts.num_ctx == 2048
    assert "num_ctx=262144 exceeds the model's context length; using 2048" in caplog.text


# Options current Ollama no longer has (api.Options in api/types.go): its FromMap logs and ignores them, any value.
DROPPED = {"mirostat": 2, "mirostat_eta": 0.5, "mirostat_tau": 3.0, "tfs_z": 0.5, "penalize_newline": "no",
           "numa": True, "low_vram": 1, "f16_kv": True, "logits_all": False, "vocab_only": False, "use_mlock": True,
           "embedding_only": False}


def test_options_ollama_dropped_are_ignored_whatever_their_value(card, caplog):
    """mirostat 2 or tfs_z 0.5 were a 400 ("no mirostat sampler"); Ollama accepts and ignores them all."""
    with caplog.at_level("WARNING", logger="sparkinfer.gateway"):
        opts = parse_options({**DROPPED, "temperature": 0.5}, card)
    assert opts.sampling == parse_options({"temperature": 0.5}, card).sampling
    assert all(f"ignoring unknown Ollama option {name!r}" in caplog.text for name in DROPPED)


def test_options_must_be_an_object(card):
    with pytest.raises(InvalidRequest, match="'options' must be an object"):
        parse_options([1], card)


def test_generation_budget(card):
    opts = parse_options({"num_ctx": 512}, card)
    assert generation_budget(500, opts) == 12
    assert generation_budget(10, parse_options({"num_ctx": 512, "num_predict": 8}, card)) == 8
    # num_predict past the window: generation stops where the window ends (done_reason length).
    assert generation_budget(500, parse_options({"num_ctx": 512, "num_predict": 100}, card)) == 12
    with pytest.raises(ContextLengthExceeded, match="the prompt is 512 tokens, which exceeds the context window of "
                                                    "512 tokens; it was not truncated"):
        generation_budget(512, opts)


@pytest.mark.parametrize("think,expected", [
    (None, {"enable_thinking": True}), (True, {"enable_thinking": True}), (False, {"enable_thinking": False}),
    ("low", {"enable_thinking": True, "reasoning_effort": "low"}),
    ("max", {"enable_thinking": True, "reasoning_effort": "xhigh"}),
], ids=repr)
def test_think_values(think, expected):
    assert thinking_kwargs(think) == expected


@pytest.mark.parametrize("think,message", [
    ("sometimes", 'invalid think value: "sometimes" (must be "high", "medium", "low", "max", true, or false)'),
    (1, 'think must be a boolean or string ("high", "medium", "low", "max", true, or false)'),
], ids=["unknown level", "a number"])
def test_bad_think_value_is_ollamas_400(think, message):
    """Ollama's ThinkValue.UnmarshalJSON words (it was "invalid think value 'sometimes': use true, ...")."""
    with pytest.raises(InvalidRequest) as info:
        thinking_kwargs(think)
    assert info.value.message == message and info.value.param == "think"


# Ollama's request options are a map[string]any: encoding/json decodes every number to a float64 and
# Options.FromMap converts it with Go's int64(f) (api/types.go), never a decode error. Past int64 the conversion holds
# at the bound (arm64); ComfyUI's seed widget goes up to 2^64 - 1.
@pytest.mark.parametrize("value, expected", [
    (2**64 - 1, 2**63 - 1), (2**63, 2**63 - 1), (1e19, 2**63 - 1), (-(2**63) - 1, -(2**63)), (-1e300, -(2**63)),
    (2**53 + 1, 2**53), (-7.9, -7),
], ids=["u64-max", "2^63", "1e19", "below-int64", "-1e300", "rounded-as-float64", "truncated"])
@pytest.mark.parametrize("name", ["seed", "top_k", "num_predict", "num_ctx", "repeat_last_n", "num_batch", "num_gpu",
                                  "main_gpu", "num_thread", "num_keep", "draft_num_predict"])
def test_integer_option_is_gos_int64_of_its_float64(name, value, expected):
    assert _number(name, value, integer=True) == expected


def test_a_seed_past_64_bits_is_served(card):
    """The seed then reaches llama-server's uint32 (test_llama_cpp_seed): 2^63 - 1 wraps to 0xFFFFFFFF, a random
    seed, as Ollama on arm64 samples; a seed that fits int64 stays the fixed seed it was."""
    assert parse_options({"seed": 2**64 - 1}, card).sampling.seed is None
    assert parse_options({"seed": 2**40 + 5}, card).sampling.seed == 5
    big = parse_options({"seed": 2**64 - 1, "num_predict": 1e30, "num_ctx": 1e30, "top_k": 2**70}, card)
    assert (big.num_predict, big.num_ctx, big.sampling.top_k) == (2**63 - 1, card.max_context_len, 0)
    assert parse_options({"num_predict": -1e30}, card).num_predict is None


def test_an_integer_past_float64_is_gos_decode_400(card):
    with pytest.raises(InvalidRequest) as err:
        parse_options({"seed": 10**400}, card)
    assert err.value.message == f"json: cannot unmarshal number {10**400} into Go value of type float64"
    assert err.value.param == "options.seed"


def test_integer_options_at_the_go_int_bounds_are_accepted(card):
    opts = parse_options({"seed": 2**63 - 1, "num_batch": -(2**63), "num_keep": 2**63 - 1, "top_k": -(2**63)}, card)
    # The seed is llama-server's uint32: 2**63 - 1 wraps to its 0xFFFFFFFF, a random seed (test_llama_cpp_seed).
    assert opts.sampling.seed is None and opts.sampling.top_k == 0


def test_integer_load_options_are_type_checked_as_ollama_does(card):
    with pytest.raises(InvalidRequest) as err:
        parse_options({"num_gpu": "all"}, card)
    assert err.value.param == "options.num_gpu"


def test_num_ctx_0_is_the_default_window(card):
    """Ollama's modelOptions: a num_ctx of 0 is the server's default (it was a 400 'must be a positive integer')."""
    assert parse_options({"num_ctx": 0}, card).num_ctx == card.max_context_len


@pytest.mark.parametrize("num_ctx", [1, 2, 3, 3.9])
def test_num_ctx_under_4_is_a_4_token_window_as_ollamas_scheduler_raises_it(card, num_ctx):
    """Ollama's server/sched.go getRunner: 'if opts.NumCtx < 4 { opts.NumCtx = 4 }' (a request's num_ctx 1 runs a
    4-token window); it was a 1-token window here, so a 2-token prompt that Ollama answers was refused."""
    opts = parse_options({"num_ctx": num_ctx}, card)
    assert opts.num_ctx == 4 and generation_budget(2, opts) == 2


def test_top_p_0_keeps_the_most_likely_token(card):
    """llama.cpp's top_p sampler (Ollama's) keeps one token at 0; it was a 400 'must be greater than 0'."""
    assert parse_options({"top_p": 0}, card).sampling.top_p == 1e-9


def test_many_unknown_options_are_a_bounded_number_of_lines(card, caplog):
    """options with 5000 unknown keys wrote 5000 lines a request: the first MAX_SHOWN are named, the rest counted."""
    with caplog.at_level("WARNING", logger="sparkinfer.gateway"):
        parse_options({**{f"k{i}": i for i in range(5000)}, "temperature": 0.5}, card)
    lines = [r.getMessage() for r in caplog.records if "unknown Ollama option" in r.getMessage()]
    assert lines == [f"ignoring unknown Ollama option 'k{i}'" for i in range(MAX_SHOWN)] + [
        f"ignoring {5000 - MAX_SHOWN} more unknown Ollama options"]
