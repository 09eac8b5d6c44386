"""Unit: Ollama /api/chat and /api/generate bodies -> the internal GenRequest (no sockets)."""
import asyncio

import pytest

from gateway.chat import render_chat
from gateway.errors import ContextLengthExceeded, InvalidRequest, NotFound, Unsupported
from gateway.fake_scheduler import FakeServing, build_tokenizer
from gateway.model import ModelCard
from gateway.ollama_names import resolve_model
from gateway.ollama_request import parse_chat, parse_generate

HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def card() -> ModelCard:
    info = asyncio.run(FakeServing(build_tokenizer(), max_context_len=2048).Info(None, None))
    return ModelCard.from_info(info)


def rendered(card, messages, **kwargs):
    return card.encode(render_chat(card.template, messages, add_generation_prompt=True, **card.special_tokens,
                                   **kwargs))


@pytest.mark.parametrize("name", ["served", "served:latest", "fake-model", "fake-model:latest", "default",
                                  "default:latest", "Served", "SERVED:Latest", "library/served",
                                  "registry.ollama.ai/library/served:latest"])
def test_model_names_as_ollama_finds_them(card, name):
    """Ollama matches names case-insensitively, with ":latest" and the default registry/namespace optional, and echoes
    the name as sent."""
    assert resolve_model({"model": name}, card, "served") == name


@pytest.mark.parametrize("name", ["llama3", "served:7b", "other/served", "served-x"])
def test_unknown_model_is_ollamas_404_body(card, name):
    with pytest.raises(NotFound) as info:
        resolve_model({"model": name}, card, "served")
    assert info.value.status == 404 and info.value.message == f"model '{name}' not found"


def test_missing_model(card):
    with pytest.raises(InvalidRequest, match="model is required"):
        resolve_model({}, card, "served")
    # /api/show's legacy key
    assert resolve_model({"name": "served"}, card, "served") == "served"


def test_chat_renders_the_template_and_streams_by_default(card):
    plan = parse_chat({"model": "default", "messages": HI, "options": {"temperature": 0, "num_predict": 5}},
                      card, "fake-model")
    assert plan.stream is True and plan.model == "default" and plan.tools is None
    gen = plan.gen
    assert gen.prompt_ids == rendered(card, HI, enable_thinking=True)
    assert gen.max_tokens == 5 and gen.sampling.temperature == 0
    assert gen.split_reasoning and gen.thinking_open and gen.num_logprobs is None
    assert gen.req_id.startswith("ollama-")


@pytest.mark.parametrize("think", [None, False])
def test_chat_continues_a_final_assistant_message(card, think):
    """Ollama's /api/chat continues a trailing assistant message (prefill, ollama/ollama#6778) rather than
    answering it with a new turn."""
    messages = HI + [{"role": "assistant", "content": "The sky is blue because"}]
    plan = parse_chat({"model": "default", "messages": messages, "think": think}, card, "x")
    prompt = card.decode(plan.gen.prompt_ids)
    assert prompt.endswith("The sky is blue because") and not plan.gen.thinking_open
    # An assistant turn that only carries tool calls is history: a new turn follows it.
    calls = HI + [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}]
    plan = parse_chat({"model": "default", "messages": calls, "think": think}, card, "x")
    assert card.decode(plan.gen.prompt_ids).rstrip().endswith(("assistant", "<think>", "</think>"))


@pytest.mark.parametrize("messages, system", [
    ([{"role": "system", "content": "Be brief."}, {"role": "system", "content": " Use French. "}, *HI],
     "Be brief.\n\nUse French."),
    ([*HI, {"role": "assistant", "content": "Salut"}, {"role": "system", "content": "Now English."}, *HI],
     "Now English."),
    ([{"role": "developer", "content": "Be brief."}, *HI], "Be brief."),
], ids=["two leading", "one after the first turn", "developer"])
def test_chat_folds_system_messages_into_one_leading(card, messages, system):
    """As Ollama's Qwen3.5/3.8 renderer: one leading system turn holding every system/developer text in order (the
    Qwen3.5 templates refuse a system message that is not first); the other messages keep their order."""
    plan = parse_chat({"model": "default", "messages": messages, "think": False}, card, "x")
    others = [m for m in messages if m["role"] not in ("system", "developer")]
    expected = rendered(card, [{"role": "system", "content": system}, *others], enable_thinking=False)
    assert plan.gen.prompt_ids == expected
    assert card.decode(plan.gen.prompt_ids, skip_special_tokens=False).count("<|im_start|>system") == 1


def test_chat_think_false_and_effort(card):
    off = parse_chat({"model": "default", "messages": HI, "think": False, "stream": False}, card, "x")
    assert off.stream is False and not off.gen.thinking_open
    assert off.gen.prompt_ids == rendered(card, HI, enable_thinking=False)
    high = parse_chat({"model": "default", "messages": HI, "think": "high"}, card, "x")
    assert high.gen.prompt_ids == rendered(card, HI, enable_thinking=True, reasoning_effort="high")


def test_chat_no_limit_means_until_the_window_is_full(card):
    plan = parse_chat({"model": "default", "messages": HI, "options": {"num_ctx": 100}}, card, "x")
    assert plan.gen.max_tokens == 100 - len(plan.gen.prompt_ids)
    plan = parse_chat({"model": "default", "messages": HI}, card, "x")
    assert plan.gen.max_tokens == 2048 - len(plan.gen.prompt_ids)


def test_chat_history_with_tool_calls_thinking_and_tool_results(card):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "thinking": "use the tool",
         "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_name": "get_weather", "content": "sunny"},
    ]
    plan = parse_chat({"model": "default", "messages": messages, "tools": tools, "think": False}, card, "x")
    text = card.decode(plan.gen.prompt_ids)
    assert "<function=get_weather>\n<parameter=city>\nParis\n</parameter>" in text
    assert "<tool_response>\nsunny\n</tool_response>" in text
    assert "# Tools" in text and plan.tools == tools


def test_empty_messages_is_a_load_request(card):
    plan = parse_chat({"model": "default", "messages": []}, card, "x")
    assert plan.gen is None and not plan.unload
    assert parse_chat({"model": "default", "keep_alive": 0}, card, "x").unload
    assert parse_chat({"model": "default", "keep_alive": "0s"}, card, "x").unload
    assert not parse_chat({"model": "default", "keep_alive": "5m"}, card, "x").unload


CHAT_REFUSALS = [
    ({"format": "yaml"}, InvalidRequest, '^invalid format: "\\\\"yaml\\\\""; expected "json" or a valid JSON Schema'),
    ({"format": {"type": "objet"}}, InvalidRequest, "format is not a valid JSON Schema"),
    ({"format": {"type": "string", "pattern": "^(?=a)"}}, InvalidRequest,
     "format cannot be enforced by constrained decoding"),
    ({"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]}, Unsupported,
     "^image input is not supported: "),
    ({"messages": [{"role": "robot", "content": "x"}]}, InvalidRequest, "messages\\[0\\].role must be one of"),
    ({"messages": [{"role": "user", "content": ["x"]}]}, InvalidRequest,
     "cannot unmarshal array into Go struct field ChatRequest.messages.content of type string"),
    ({"messages": "hi"}, InvalidRequest, "cannot unmarshal string into Go struct field ChatRequest.messages"),
    ({"stream": "yes"}, InvalidRequest, "cannot unmarshal string into Go struct field ChatRequest.stream of type bool"),
    ({"keep_alive": [5]}, InvalidRequest, "^Unsupported type: '\\[\\]interface {}'$"),
    ({"tools": [{"type": "function"}]}, InvalidRequest, "tools\\[0\\].function.name is required"),
    ({"logprobs": True, "top_logprobs": 50}, InvalidRequest, "^top_logprobs must be between 0 and 20$"),
    ({"top_logprobs": -1}, InvalidRequest, "^top_logprobs must be between 0 and 20$"),
    ({"logprobs": True, "top_logprobs": "2"}, InvalidRequest,
     "^json: cannot unmarshal string into Go struct field ChatRequest.top_logprobs of type int$"),
    ({"options": []}, InvalidRequest,
     "^json: cannot unmarshal array into Go struct field ChatRequest.options of type map\\[string\\]interface {}$"),
    ({"think": "always"}, InvalidRequest, "invalid think value"),
    ({"messages": [{"role": "assistant", "content": "", "tool_calls": 1.5}]}, InvalidRequest,
     "cannot unmarshal number into Go struct field ChatRequest.messages.tool_calls of type \\[\\]api.ToolCall"),
]


@pytest.mark.parametrize("change,error,message", CHAT_REFUSALS, ids=[str(c[0])[:40] for c in CHAT_REFUSALS])
def test_chat_refusals_are_400_with_a_reason(card, change, error, message):
    with pytest.raises(error, match=message) as info:
        parse_chat({"model": "default", "messages": HI, **change}, card, "x")
    assert info.value.status == 400


def test_chat_prompt_longer_than_num_ctx_is_refused(card):
    long = [{"role": "user", "content": "Hello world " * 100}]
    with pytest.raises(ContextLengthExceeded, match="exceeds the context window of 64 tokens; it was not truncated"):
        parse_chat({"model": "default", "messages": long, "options": {"num_ctx": 64}}, card, "x")


def test_chat_logprobs(card):
    plan = parse_chat({"model": "default", "messages": HI, "logprobs": True, "top_logprobs": 2}, card, "x")
    assert plan.want_logprobs and plan.gen.num_logprobs == 2


def test_top_logprobs_without_logprobs_is_ignored(card):
    """Ollama passes top_logprobs on only with logprobs: true; alone it was a 400 here."""
    plan = parse_chat({"model": "default", "messages": HI, "top_logprobs": 3}, card, "x")
    assert not plan.want_logprobs and plan.gen.num_logprobs is None


def test_generate_applies_template_with_system(card):
    plan = parse_generate({"model": "default", "prompt": "Hi", "system": "Be brief.", "think": False}, card, "x")
    messages = [{"role": "system", "content": "Be brief."}, *HI]
    assert plan.gen.prompt_ids == rendered(card, messages, enable_thinking=False)
    assert plan.return_context and plan.gen.num_logprobs == 0 and not plan.want_logprobs


def test_generate_raw_returns_no_context(card):
    """Ollama's docs: raw mode will not return a context; an empty one sent with it (clients send []) is none."""
    plan = parse_generate({"model": "default", "prompt": "Hello", "raw": True, "context": []}, card, "x")
    assert plan.gen.prompt_ids == card.encode("Hello") and not plan.return_context
    assert not plan.gen.split_reasoning and not plan.gen.thinking_open and plan.gen.num_logprobs is None


def test_generate_context_continues_the_conversation(card):
    plan = parse_generate({"model": "default", "prompt": "Hi", "context": [5, 6], "think": False}, card, "x")
    assert plan.gen.prompt_ids == [5, 6] + rendered(card, HI, enable_thinking=False) and plan.return_context


@pytest.mark.parametrize("extra, split, thinking_open", [
    ({"think": False, "system": ""}, False, False),
    ({"think": True}, True, False),
    ({"think": "high", "prompt": "<|im_start|>assistant\n<think>\n"}, True, True),
], ids=["think off, empty system", "think on", "think high, prompt opens the block"])
def test_generate_raw_takes_think_and_an_empty_system(card, extra, split, thinking_open):
    """Ollama refuses only a system prompt (and a template) with raw: `think` says whether the raw answer's
    <think> block is parsed into `thinking`, open from the start when the raw prompt ends with <think>."""
    body = {"model": "default", "prompt": "Hello", "raw": True, **extra}
    plan = parse_generate(body, card, "x")
    assert plan.gen.prompt_ids == card.encode(body["prompt"])
    assert plan.gen.split_reasoning is split and plan.gen.thinking_open is thinking_open


@pytest.mark.parametrize("extra", [{}, {"context": [5, 6]}, {"context": [5, 6], "keep_alive": 0}],
                         ids=["no context", "a context", "unload with a context"])
def test_generate_empty_prompt_loads(card, extra):
    """Ollama answers an empty prompt with a load (unload with keep_alive 0) whatever context it carries; with a
    context it generated a templated empty user turn."""
    plan = parse_generate({"model": "default", "prompt": "", **extra}, card, "x")
    assert plan.gen is None and plan.unload is (extra.get("keep_alive") == 0)


def test_generate_raw_checks_come_before_the_load(card):
    with pytest.raises(InvalidRequest, match="^raw mode does not support template, system, or context$"):
        parse_generate({"model": "default", "prompt": "", "raw": True, "system": "x"}, card, "x")


GENERATE_REFUSALS = [
    ({"suffix": "return x"}, Unsupported, "^registry.ollama.ai/library/x:latest does not support insert$"),
    ({"template": "{{ template \"x\" }}"}, InvalidRequest, "^template: unsupported function 'template'$"),
    ({"raw": True, "template": "{{ .Prompt }}"}, InvalidRequest,
     "^raw mode does not support template, system, or context$"),
    ({"images": ["aGk="]}, Unsupported, "^image input is not supported: "),
    ({"raw": True, "system": "x"}, InvalidRequest, "^raw mode does not support template, system, or context$"),
    ({"raw": True, "context": [5, 6]}, InvalidRequest, "^raw mode does not support template, system, or context$"),
    ({"raw": True, "think": "none"}, InvalidRequest, 'invalid think value: "none"'),
    ({"prompt": 5}, InvalidRequest, "cannot unmarshal number into Go struct field GenerateRequest.prompt of type string"),
    ({"context": ["a"]}, InvalidRequest,
     "^json: cannot unmarshal string into Go struct field GenerateRequest.context of type int$"),
    ({"context": [1.5]}, InvalidRequest,
     "^json: cannot unmarshal number 1.5 into Go struct field GenerateRequest.context of type int$"),
    ({"context": "1 2"}, InvalidRequest,
     "^json: cannot unmarshal string into Go struct field GenerateRequest.context of type \\[\\]int$"),
    ({"top_logprobs": 2.5}, InvalidRequest,
     "^json: cannot unmarshal number 2.5 into Go struct field GenerateRequest.top_logprobs of type int$"),
    ({"options": "x"}, InvalidRequest,
     "^json: cannot unmarshal string into Go struct field GenerateRequest.options of type map\\[string\\]interface "
     "{}$"),
    ({"context": [10 ** 6]}, InvalidRequest, "context token ids must be in"),
    ({"format": ["json"]}, InvalidRequest, '^invalid format: "\\[\\\\"json\\\\"\\]"; expected "json" or a valid JSON'),
]


@pytest.mark.parametrize("fmt, think, start", [
    ("json", False, 'start: %json{"$defs": {"value"'),
    ({"type": "object", "properties": {"a": {"type": "string"}}}, None, "start: /(?s:.*)/ "),
], ids=["json-thinking-off", "schema-after-reasoning"])
def test_format_becomes_a_grammar(card, fmt, think, start):
    plan = parse_chat({"model": "default", "messages": HI, "format": fmt, "think": think}, card, "x")
    assert plan.gen.constraint.kind == "lark" and plan.gen.constraint.grammar.startswith(start)
    assert plan.format_schema == ({"type": "object"} if fmt == "json" else fmt)
    generated = parse_generate({"model": "default", "prompt": "Hi", "raw": True, "format": fmt}, card, "x")
    assert generated.gen.constraint.grammar.startswith("start: %json")


@pytest.mark.parametrize("change,error,message", GENERATE_REFUSALS, ids=[str(c[0])[:40] for c in GENERATE_REFUSALS])
def test_generate_refusals_are_400_with_a_reason(card, change, error, message):
    with pytest.raises(error, match=message) as info:
        parse_generate({"model": "default", "prompt": "Hi", **change}, card, "x")
    assert info.value.status == 400


def test_body_must_be_an_object(card):
    with pytest.raises(InvalidRequest, match="json: cannot unmarshal array into Go value of type api.GenerateRequest"):
        parse_generate([1, 2], card, "x")
