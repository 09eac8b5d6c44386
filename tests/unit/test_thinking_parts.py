"""An assistant turn's thinking content parts (fake scheduler), as SGLang's ChatCompletionMessageContentThinkingPart
reads them ({"type": "thinking" | "reasoning", "thinking" or "text"}; LiteLLM sends Anthropic's thinking blocks so):
the turn's reasoning, replayed where the template replays reasoning, never its text. They were a 400 ("only text parts
are supported"), for the whole conversation each later request resends."""
import orjson
import pytest

from gateway.fake_scheduler import build_tokenizer

TOKENIZER = build_tokenizer()
USER = {"role": "user", "content": "Choose a fruit."}
LATER = {"role": "user", "content": "Which one?"}


def turn(*parts) -> dict:
    return {"role": "assistant", "content": list(parts)}


async def post(client, body: dict, path: str = "/v1/chat/completions") -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps({"model": "default", **body}))
    return response.status, orjson.loads(await response.read())


def prompt_of(fake) -> str:
    return TOKENIZER.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


@pytest.mark.parametrize("part", [{"type": "thinking", "thinking": "I pick MANGO", "signature": "sig"},
                                  {"type": "reasoning", "text": "I pick MANGO"}], ids=["thinking", "reasoning"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions"])
async def test_thinking_parts_are_the_turns_reasoning(stack, part, path):
    client, fake = stack
    messages = [USER, turn(part, {"type": "text", "text": "ok"}), LATER]
    status, body = await post(client, {"messages": messages, "chat_template_kwargs": {"preserve_thinking": True}},
                              path)
    assert status == 200, body
    prompt = prompt_of(fake)
    assert "<|im_start|>assistant\n<think>\nI pick MANGO\n</think>\n\nok<|im_end|>" in prompt
    # As with reasoning_content: before the last user message the template leaves it out, and never as text.
    status, body = await post(client, {"messages": messages}, path)
    assert status == 200 and "MANGO" not in prompt_of(fake) and "<|im_start|>assistant\nok<|im_end|>" in prompt_of(fake)


async def test_a_reasoning_field_with_text_wins_over_the_parts(stack):
    client, fake = stack
    message = {**turn({"type": "thinking", "thinking": "from the part"}, {"type": "text", "text": "ok"}),
               "reasoning_content": "from the field"}
    status, body = await post(client, {"messages": [USER, message]})
    assert status == 200, body
    assert "<think>\nfrom the field\n</think>\n\nok" in prompt_of(fake) and "from the part" not in prompt_of(fake)


async def test_a_final_turn_of_thinking_parts_is_continued_after_them(stack):
    client, fake = stack
    body = {"messages": [USER, turn({"type": "thinking", "thinking": "I pick MANGO"})],
            "continue_final_message": True, "add_generation_prompt": False}
    status, answer = await post(client, body)
    assert status == 200, answer
    assert prompt_of(fake).endswith("<|im_start|>assistant\n<think>\nI pick MANGO\n</think>")
    status, counted = await post(client, body, "/tokenize")
    assert status == 200 and counted["count"] == answer["usage"]["prompt_tokens"]


@pytest.mark.parametrize("message,param,words", [
    ({"role": "user", "content": [{"type": "thinking", "thinking": "x"}]}, "messages[0].content[0].type",
     "only valid in assistant messages"),
    (turn({"type": "thinking", "thinking": "x", "text": "y"}), "messages[0].content[0].thinking", "exactly one"),
    (turn({"type": "thinking"}), "messages[0].content[0].thinking", "exactly one"),
], ids=["user-turn", "both-strings", "no-string"])
async def test_a_misplaced_or_empty_thinking_part_is_a_400(stack, message, param, words):
    client, _ = stack
    status, body = await post(client, {"messages": [message, LATER]})
    assert status == 400 and body["error"]["param"] == param and words in body["error"]["message"], body
