"""An earlier turn's tool call whose arguments are no JSON object reaches the chat template as {} (fake scheduler)."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

# The Qwen3.5 / 3.6 templates iterate an earlier call's arguments as a mapping (chat_template.jinja:
# `for args_name, args_value in tool_call.arguments|items`); a string there is jinja's TypeError.
QWEN_STYLE = (
    "{%- for message in messages -%}<|im_start|>{{ message.role }}\n{{ message.content }}"
    "{%- for tool_call in message.tool_calls or [] -%}{%- set call = tool_call.function -%}"
    "<tool_call><function={{ call.name }}>"
    "{%- for name, value in call.arguments|items -%}<parameter={{ name }}>{{ value }}</parameter>{%- endfor -%}"
    "</function></tool_call>{%- endfor -%}<|im_end|>\n{% endfor -%}<|im_start|>assistant\n")


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=2048, template=QWEN_STYLE)
    async with fake_gateway(fake) as pair:
        yield pair


def history(arguments) -> list:
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
    return [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}, {"role": "user", "content": "Thanks"}]


async def rendered(client, fake, path: str, body: dict) -> str:
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    return fake.tokenizer.decode(fake.script.requests[-1].prompt_token_ids, skip_special_tokens=False)


@pytest.mark.parametrize("arguments", ['{"city": "Par', "", "[1, 2]", "42", "null", None],
                         ids=["cut-json", "empty", "list", "number", "json-null", "null"])
async def test_arguments_that_are_no_object_render_as_empty(stack, arguments):
    # vLLM's chat_utils._postprocess_messages coerces them to {} (vllm#48922): refusing the turn would fail every
    # later request of the conversation, which replays it. Here the string was a 400 'Can only get item pairs'.
    client, fake = stack
    prompt = await rendered(client, fake, "/v1/chat/completions", {"messages": history(arguments), "max_tokens": 2})
    assert "<|im_start|>assistant\n<tool_call><function=get_weather></function></tool_call><|im_end|>" in prompt


async def test_object_arguments_still_render_their_parameters(stack):
    client, fake = stack
    prompt = await rendered(client, fake, "/v1/chat/completions",
                            {"messages": history('{"city": "Paris"}'), "max_tokens": 2})
    assert "<function=get_weather><parameter=city>Paris</parameter></function>" in prompt


async def test_a_responses_function_call_item_with_cut_arguments_is_served(stack):
    client, fake = stack
    items = [{"role": "user", "content": "Weather?"},
             {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": '},
             {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
             {"role": "user", "content": "Continue."}]
    prompt = await rendered(client, fake, "/v1/responses", {"input": items, "max_output_tokens": 2})
    assert "<tool_call><function=get_weather></function></tool_call>" in prompt


# Llama 3.1's template takes any assistant turn holding the key for a call turn, and refuses all but one call.
LLAMA_STYLE = (
    "{%- for message in messages -%}{%- if 'tool_calls' in message -%}"
    "{%- if message.tool_calls|length != 1 -%}{{ raise_exception('This model only supports single tool-calls at "
    "once!') }}{%- endif -%}<call>{{ message.tool_calls[0].function.name }}</call>"
    "{%- else -%}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{%- endif -%}{% endfor -%}"
    "<|im_start|>assistant\n")


async def test_an_empty_tool_calls_list_is_no_calls():
    # vllm-project/vllm#13978: clients (the openai SDK's model_dump of a message) send "tool_calls": [] on plain
    # assistant turns; vLLM's _postprocess_messages drops it. It was the template's 400 here.
    fake = FakeServing(build_tokenizer(), max_context_len=2048, template=LLAMA_STYLE)
    async with fake_gateway(fake) as (client, _):
        messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello", "tool_calls": []},
                    {"role": "user", "content": "Bye"}]
        prompt = await rendered(client, fake, "/v1/chat/completions", {"messages": messages, "max_tokens": 2})
    assert "<|im_start|>assistant\nHello<|im_end|><|im_start|>user\nBye<|im_end|>" in prompt
