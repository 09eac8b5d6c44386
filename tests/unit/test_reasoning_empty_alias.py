"""An earlier turn's reasoning sent back under two names, one of them empty (pi's openai-completions provider sends
the thinking as `reasoning` and, for providers it marks as needing it, `reasoning_content: ""` beside it:
aliou/pi-neuralwatt#102): the text is replayed. The empty reasoning_content won, as the first name set, and the turn
rendered an empty think block, so the model lost the reasoning of its own tool call; vLLM reads `reasoning` first
(ChatCompletionRequest._normalize_messages_before keeps it over reasoning_content) and Ollama's /v1 reads only
`reasoning`, so both replay it."""
import pytest

from tests.unit.test_template_history import TOOLS, prompt_of, transformers_render

CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}


def history(reasoning: dict) -> list:
    return [{"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [CALL], **reasoning},
            {"role": "tool", "tool_call_id": "call_1", "content": "rain"}]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions"])
@pytest.mark.parametrize("fields", [{"reasoning": "I need the tool.", "reasoning_content": ""},
                                    {"reasoning_content": "", "thinking": "I need the tool."},
                                    {"reasoning_content": "I need the tool.", "reasoning": ""}],
                         ids=["pi: reasoning and an empty reasoning_content", "an empty one and thinking",
                              "reasoning_content and an empty reasoning"])
async def test_an_empty_name_does_not_hide_the_reasoning(stack, path, fields):
    client, fake = stack
    body = {"model": "fake-model", "messages": history(fields), "tools": TOOLS, "max_tokens": 1}
    prompt = await prompt_of(client, fake, path, body)
    assert "<|im_start|>assistant\n<think>\nI need the tool.\n</think>\n\n<tool_call>" in prompt
    assert prompt == transformers_render(history({"reasoning_content": "I need the tool."}), tools=TOOLS,
                                         add_generation_prompt=True)


async def test_all_names_empty_is_an_empty_think_block(stack):
    client, fake = stack
    body = {"model": "fake-model", "messages": history({"reasoning": "", "reasoning_content": ""}), "tools": TOOLS,
            "max_tokens": 1}
    prompt = await prompt_of(client, fake, "/v1/chat/completions", body)
    assert "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>" in prompt
