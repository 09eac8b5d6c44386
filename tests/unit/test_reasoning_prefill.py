"""An assistant turn continued from inside its thinking (continue_final_message with content '<think>\\n...') is
reasoning until </think>, as vLLM reads the prompt (the qwen3 parser's is_reasoning_end over the prompt ids: the last
think tag decides), streamed or not, and structured output waits for the thinking to close (fake scheduler, tiny
card for the grammar)."""
import json

import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.openai import parse_chat
from gateway.reasoning import prompt_opens_thinking
from tests.unit.test_grammar_tools import accepts, card  # noqa: F401  (card is a fixture)

INSIDE = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>\nLet me"}]
AFTER = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure"}]
CONTINUE = {"continue_final_message": True, "add_generation_prompt": False}


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    async with fake_gateway(fake) as pair:
        yield pair


async def _answer(client, body: dict, stream: bool) -> tuple:
    """(reasoning, content) of a chat answer, reassembled when streamed."""
    response = await client.post("/v1/chat/completions", json={**body, "stream": stream})
    assert response.status == 200, await response.text()
    if not stream:
        message = (await response.json())["choices"][0]["message"]
        return message["reasoning_content"], message["content"]
    reasoning, content = "", ""
    for line in (await response.text()).splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                reasoning += choice["delta"].get("reasoning_content") or ""
                content += choice["delta"].get("content") or ""
    return reasoning or None, content


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_prefill_inside_the_thinking_continues_the_reasoning(stack, stream):
    # Before: only a prompt ending in <think> counted as open thinking, so the continued reasoning and its </think>
    # came back as content: (None, ' see. Fine.</think>\n\nHello world').
    client, fake = stack
    fake.script.reply = " see. Fine.</think>\n\nHello world"
    assert await _answer(client, {"messages": INSIDE, **CONTINUE}, stream) == (" see. Fine.", "Hello world")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_prefill_after_the_thinking_stays_the_answer(stack, stream):
    client, fake = stack
    fake.script.reply = " thing, here it is."
    assert await _answer(client, {"messages": AFTER, **CONTINUE}, stream) == (None, " thing, here it is.")


@pytest.mark.parametrize("prompt, expected", [
    ("<|im_start|>assistant\n<think>\n", True),
    ("<think>\na\n</think>\n\nb<|im_end|>\n<|im_start|>assistant\n<think>\n", True),
    ("<|im_start|>assistant\n<think>\n\n</think>\n\n", False),
    ("<|im_start|>assistant\n<think>\n\n</think>\n\n<think>\nLet me", True),
    ("<|im_start|>assistant\n<think>\n\n</think>\n\nSure", False),
    ("<|im_start|>user\nhi<|im_end|>\n", False),
])
def test_the_last_think_tag_decides(prompt, expected):
    assert prompt_opens_thinking(prompt) is expected


def test_structured_output_waits_for_the_continued_thinking(card):  # noqa: F811
    # Before: the JSON grammar applied from the first token, so the model could not close the thinking it was in.
    body = {"messages": INSIDE, **CONTINUE, "response_format": {"type": "json_object"}}
    plan = parse_chat(body, card, "tiny")
    assert plan.gen.thinking_open
    assert accepts(card, plan.gen.constraint.grammar, ' see.\n</think>\n\n{"a": 1}')
    assert not accepts(card, plan.gen.constraint.grammar, '{"a": 1}')
