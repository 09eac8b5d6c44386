"""/v1/responses (fake scheduler): a reasoning item that no assistant output followed (its response was cut inside the
thinking, so only the reasoning item came back, and the client sends the next user message after it) is a turn of its
own where it stands, as vLLM's Responses API makes each reasoning item its own assistant message
(responses/utils.py _construct_single_message_from_response_item). It waited for the next assistant message and
became the thinking of the answer to the next user message; a trailing one was dropped."""

R1 = {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "First thought."}]}
A2 = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Second answer."}]}


def prompt_of(fake) -> str:
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


async def _render(client, fake, items: list) -> str:
    body = {"model": "fake-model", "input": items}
    response = await client.post("/v1/responses", json=body)
    assert response.status == 200, await response.text()
    counted = await (await client.post("/v1/responses/input_tokens", json=body)).json()
    assert counted["input_tokens"] == len(fake.script.requests[-1].prompt_token_ids)
    return prompt_of(fake)


async def test_reasoning_before_a_user_message_stays_in_its_turn(stack):
    client, fake = stack
    items = [{"role": "user", "content": "q1"}, R1, {"role": "user", "content": "q2"}, A2]
    assert await _render(client, fake, items) == (
        "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n<|im_start|>user\nq2<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\nSecond answer.<|im_end|>\n<|im_start|>assistant\n<think>\n")


async def test_a_trailing_reasoning_item_is_replayed(stack):
    client, fake = stack
    assert await _render(client, fake, [{"role": "user", "content": "q1"}, R1]) == (
        "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\n<think>\nFirst thought.\n</think>\n\n<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n")
