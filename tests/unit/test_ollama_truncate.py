"""Gateway with the fake scheduler: /api/chat `truncate: true` leaves out the oldest messages, as Ollama does."""
import pytest


OLD = "The secret word is PELICAN. " + "Lorem ipsum dolor sit amet. " * 40
SYSTEM, LAST = {"role": "system", "content": "Be brief."}, {"role": "user", "content": "And now?"}
MESSAGES = [SYSTEM, {"role": "user", "content": OLD}, {"role": "assistant", "content": "Noted."}, LAST]
BASE = {"model": "fake-model", "stream": False, "think": False, "options": {"num_ctx": 128}}


async def rendered(client, messages: list) -> str:
    body = {**BASE, "messages": messages, "_debug_render_only": True}
    return (await (await client.post("/api/chat", json=body)).json())["_debug_info"]["rendered_template"]


async def test_truncate_true_leaves_out_the_oldest_messages_that_do_not_fit(fake):
    """Ollama's chatPrompt (server/prompt.go), with the request's truncate true: while the rendered conversation is
    longer than num_ctx, the oldest messages are left out, the system message and the last one kept. Here every
    over-long conversation was a 400, so a client that asked for truncation could not continue a long chat."""
    client, servicer = fake
    servicer.script.reply = "Hello"
    answer = await (await client.post("/api/chat", json={**BASE, "messages": MESSAGES, "truncate": True})).json()
    prompt_ids = list(servicer.script.requests[0].prompt_token_ids)
    prompt = servicer.tokenizer.decode(prompt_ids, skip_special_tokens=False)
    assert prompt == await rendered(client, [SYSTEM, MESSAGES[2], LAST]) and "PELICAN" not in prompt
    assert answer["message"]["content"] == "Hello" and answer["prompt_eval_count"] == len(prompt_ids) < 128


@pytest.mark.parametrize("extra", [{}, {"truncate": False}, {"truncate": None}], ids=["absent", "false", "null"])
async def test_without_truncate_true_an_over_long_conversation_is_a_400(fake, extra):
    """The default stays the 400 (public case C13, ollama/ollama#4967: Ollama's silent default truncation answered
    about a prompt it had cut); Ollama's truncate false refuses it too."""
    client, servicer = fake
    response = await client.post("/api/chat", json={**BASE, "messages": MESSAGES, **extra})
    error = (await response.json())["error"]
    assert response.status == 400 and "context window of 128 tokens" in error
    # Ollama's own words open it (its runner's errorInputTooLong), which clients match to shorten and retry.
    assert error.startswith("the input length exceeds the context length: the prompt is ")
    assert servicer.script.requests == []


async def test_a_last_message_longer_than_the_window_is_a_400_with_truncate(fake):
    client, servicer = fake
    response = await client.post("/api/chat", json={**BASE, "truncate": True,
                                                    "messages": [SYSTEM, {"role": "user", "content": OLD}]})
    error = (await response.json())["error"]
    assert response.status == 400 and "context window of 128 tokens" in error
    # The request asked for truncation and got it: the 400 says so, not "it was not truncated" (ollama/ollama#18107:
    # a misleading error after truncation), and names the last message as what to shorten.
    assert "not truncated" not in error and "oldest messages were left out" in error and "last message" in error
    assert servicer.script.requests == []


async def test_more_messages_than_the_window_has_tokens_are_truncated_not_refused(fake):
    """With truncate true the refusal of a list longer than the window (each message is a token at least) gives way
    to the truncation: the newest messages that fit are kept."""
    client, servicer = fake
    servicer.script.reply = "Hello"
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(300)]
    response = await client.post("/api/chat", json={**BASE, "truncate": True, "messages": [SYSTEM, *history, LAST]})
    prompt = servicer.tokenizer.decode(list(servicer.script.requests[0].prompt_token_ids), skip_special_tokens=False)
    assert response.status == 200 and prompt.startswith("<|im_start|>system\nBe brief.<|im_end|>\n")
    assert "turn 299" in prompt and "turn 0\n" not in prompt and "And now?" in prompt
