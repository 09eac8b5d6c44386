"""/v1/responses (fake scheduler): a final assistant message item whose status is in_progress or incomplete is
continued, as vLLM's Responses API continues it (vllm/entrypoints/openai/responses/utils.py
should_continue_final_message: "partial message completion similar to Anthropic's Messages API"), the prompt ending
at its text; it was closed and answered with a new turn, so a client that resends an answer cut short got a second
answer after the first. A completed message, or a bare one without status, still opens a new turn."""
import pytest

REPLY = " because 17*23 = 391."
USER = {"role": "user", "content": "17*23?"}
REASONING = {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Multiply."}]}


def partial(status) -> dict:
    item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is 391"}]}
    return {**item, "status": status} if status else item


def prompt_of(fake) -> str:
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


@pytest.mark.parametrize("status", ["incomplete", "in_progress"])
async def test_an_unfinished_final_message_is_continued(stack, status):
    client, fake = stack
    fake.script.reply = REPLY
    body = {"model": "fake-model", "input": [USER, REASONING, partial(status)]}
    answer = await (await client.post("/v1/responses", json=body)).json()
    assert prompt_of(fake).endswith("<|im_start|>assistant\n<think>\nMultiply.\n</think>\n\nIt is 391")
    assert [item["type"] for item in answer["output"]] == ["message"]
    assert answer["output"][0]["content"][0]["text"] == REPLY
    counted = await (await client.post("/v1/responses/input_tokens", json=body)).json()
    assert counted["input_tokens"] == answer["usage"]["input_tokens"]


@pytest.mark.parametrize("status", ["completed", None], ids=["completed", "no status"])
async def test_a_finished_final_message_gets_a_new_turn(stack, status):
    client, fake = stack
    fake.script.reply = REPLY
    body = {"model": "fake-model", "input": [USER, partial(status)]}
    assert (await client.post("/v1/responses", json=body)).status == 200
    assert prompt_of(fake).endswith("It is 391<|im_end|>\n<|im_start|>assistant\n<think>\n")
