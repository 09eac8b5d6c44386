"""Golden renders of worker/assets/chat_template.jinja (the Qwen3.8 format), through the gateway and transformers."""
import pytest

from gateway.chat import TemplateError, compile_template, render_chat
from gateway.fake_scheduler import read_template

SOURCE = read_template()
TEMPLATE = compile_template(SOURCE)
WEATHER_PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}}
TOOLS = [{"type": "function",
          "function": {"name": "get_weather", "description": "Weather now", "parameters": WEATHER_PARAMS}}]
TOOLS_BLOCK = ('# Tools\n\nYou have access to the following functions:\n\n<tools>\n'
               '{"type": "function", "function": {"name": "get_weather", "description": "Weather now", '
               '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}\n</tools>')


def render(messages, **kwargs):
    return render_chat(TEMPLATE, messages, **kwargs)


def test_user_turn_thinking_on_by_default():
    assert render([{"role": "user", "content": "hi"}]) == \
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"


def test_thinking_off_closes_empty_think_block():
    out = render([{"role": "user", "content": "hi"}], enable_thinking=False)
    assert out == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def test_developer_becomes_system_and_content_parts_join():
    out = render([{"role": "developer", "content": "Be brief."},
                  {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])
    assert out.startswith("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nab<|im_end|>\n")


def test_no_generation_prompt():
    out = render([{"role": "user", "content": "hi"}], add_generation_prompt=False)
    assert out == "<|im_start|>user\nhi<|im_end|>\n"


def test_tools_in_system_turn_before_user_system_text():
    out = render([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "weather?"}],
                 tools=TOOLS)
    assert out.startswith("<|im_start|>system\n" + TOOLS_BLOCK + "\n\nIf you choose to call a function ONLY reply")
    assert "<function=example_function_name>" in out
    assert out.endswith("</IMPORTANT>\n\nYou are terse.<|im_end|>\n<|im_start|>user\nweather?<|im_end|>\n"
                        "<|im_start|>assistant\n<think>\n")


def test_assistant_tool_calls_and_grouped_tool_results():
    messages = [
        {"role": "user", "content": "weather in Paris and Rome?"},
        {"role": "assistant", "content": None, "reasoning_content": "two calls",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 2}'}},
                        {"id": "c2", "type": "function",
                         "function": {"name": "get_weather", "arguments": {"city": "Rome", "opts": {"unit": "C"}}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "rain"},
    ]
    out = render(messages, tools=TOOLS)
    assert out.split("</IMPORTANT><|im_end|>\n", 1)[1] == (
        "<|im_start|>user\nweather in Paris and Rome?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\ntwo calls\n</think>\n\n"
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>\n"
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n"
        '<parameter=opts>\n{"unit": "C"}\n</parameter>\n</function>\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrain\n</tool_response>"
        "<|im_end|>\n<|im_start|>assistant\n<think>\n")


HISTORY = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "A", "reasoning": "ra"},
           {"role": "user", "content": "b"}, {"role": "assistant", "content": "B", "reasoning_content": "rb"}]


def test_past_reasoning_only_after_last_user_query_by_default():
    out = render(HISTORY, add_generation_prompt=False)
    assert out == ("<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
                   "<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n<think>\nrb\n</think>\n\nB<|im_end|>\n")


def test_preserve_thinking_replays_every_turn():
    out = render(HISTORY, add_generation_prompt=False, preserve_thinking=True)
    assert "<|im_start|>assistant\n<think>\nra\n</think>\n\nA<|im_end|>" in out
    assert "<|im_start|>assistant\n<think>\nrb\n</think>\n\nB<|im_end|>" in out


def test_inline_think_in_assistant_content_is_split():
    out = render([{"role": "user", "content": "q"},
                  {"role": "assistant", "content": "<think>\nhidden\n</think>\n\nshown"}], add_generation_prompt=False)
    assert out.endswith("<|im_start|>assistant\n<think>\nhidden\n</think>\n\nshown<|im_end|>\n")


@pytest.mark.parametrize("effort,expected", [("low", "Reasoning effort is set to low."),
                                             ("high", "Reasoning effort is set to high."),
                                             ("xhigh", "Reasoning effort is set to xhigh.")])
def test_reasoning_effort_preamble(effort, expected):
    out = render([{"role": "user", "content": "hi"}], reasoning_effort=effort)
    assert out.startswith("<|im_start|>system\n" + expected)


def test_reasoning_effort_medium_adds_nothing_and_bad_value_is_refused():
    assert render([{"role": "user", "content": "hi"}], reasoning_effort="medium").startswith("<|im_start|>user")
    with pytest.raises(TemplateError) as info:
        render([{"role": "user", "content": "hi"}], reasoning_effort="max")
    assert info.value.status == 400 and "reasoning_effort" in info.value.message


def test_unknown_role_is_labelled_user_turn():
    out = render([{"role": "critic", "content": "meh"}], add_generation_prompt=False)
    assert out == "<|im_start|>user\n[critic]: meh<|im_end|>\n"


def test_image_part_is_refused_with_typed_error():
    with pytest.raises(TemplateError):
        render([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])


@pytest.mark.parametrize("kwargs", [{}, {"enable_thinking": False}, {"tools": TOOLS}, {"preserve_thinking": True},
                                    {"reasoning_effort": "low"}],
                         ids=["default", "no-think", "tools", "preserve", "low"])
def test_transformers_renders_the_same(kwargs):
    chat_utils = pytest.importorskip("transformers.utils.chat_template_utils")
    messages = HISTORY + [{"role": "user", "content": "c"}]
    tools = kwargs.pop("tools", None)
    ours = render(messages, tools=tools, **kwargs)
    theirs, _ = chat_utils.render_jinja_template(conversations=[messages], chat_template=SOURCE, tools=tools,
                                                 add_generation_prompt=True, **kwargs)
    assert theirs[0] == ours
