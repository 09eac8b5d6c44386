"""Ollama's `_debug_render_only` on its OpenAI-compatible chat route: the rendered prompt, nothing generated."""
import pytest

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions"], ids=["v1", "lmstudio"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_debug_render_only_answers_the_prompt_and_generates_nothing(fake, path, stream):
    """As Ollama's /v1/chat/completions answers it (openai.ToChatCompletion of ChatHandler's early answer): one
    chat.completion object with an empty choice, zero usage and the prompt /api/chat renders for the same messages
    in _debug_info, streamed or not; no Generate reaches the scheduler."""
    client, servicer = fake
    body = {"model": "fake-model", "messages": MESSAGES, "stream": stream, "_debug_render_only": True}
    response = await client.post(path, json=body)
    assert response.status == 200 and response.content_type == "application/json"
    answer = await response.json()
    assert answer["object"] == "chat.completion" and answer["model"] == "fake-model"
    assert answer["choices"] == [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": None}]
    assert answer["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    ollama = await (await client.post("/api/chat", json={"model": "fake-model", "messages": MESSAGES,
                                                         "_debug_render_only": True})).json()
    rendered = answer["_debug_info"]["rendered_template"]
    assert rendered == ollama["_debug_info"]["rendered_template"]
    assert rendered == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n" \
                       "<|im_start|>assistant\n<think>\n"
    assert servicer.script.requests == []


async def test_debug_render_only_false_generates(fake):
    client, servicer = fake
    servicer.script.reply = "Hello"
    body = {"model": "fake-model", "messages": MESSAGES, "_debug_render_only": False, "enable_thinking": False}
    answer = await (await client.post("/v1/chat/completions", json=body)).json()
    assert answer["choices"][0]["message"]["content"] == "Hello" and "_debug_info" not in answer
    assert len(servicer.script.requests) == 1
