"""vLLM's return_prompt_text on chat (vllm PR #42052, v0.21: ChatCompletionRequest.return_prompt_text): the answer's
prompt_text is the prompt the chat template rendered, beside the choices, and in a stream on its first chunk only. It
was logged as an unknown field and ignored, so a client had no way to see the prompt its messages became."""
import json

import pytest

from gateway.fake_scheduler import read_template

PATHS = ["/v1/chat/completions", "/api/v0/chat/completions"]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather? <|im_end|> is plain text here"},
            {"role": "assistant", "content": "Sunny.", "reasoning_content": "old thought"},
            {"role": "user", "content": "And tomorrow?"}]


def transformers_render(messages: list, **kwargs) -> str:
    chat_utils = pytest.importorskip("transformers.utils.chat_template_utils")
    rendered, _ = chat_utils.render_jinja_template(conversations=[messages], chat_template=read_template(), **kwargs)
    return rendered[0]


@pytest.mark.parametrize("path", PATHS)
async def test_the_answer_carries_the_rendered_prompt(stack, path):
    client, _ = stack
    body = {"messages": MESSAGES, "tools": TOOLS, "return_prompt_text": True,
            "chat_template_kwargs": {"enable_thinking": False}}
    response = await client.post(path, json=body)
    answer = await response.json()
    assert response.status == 200, answer
    assert answer["prompt_text"] == transformers_render(MESSAGES, tools=TOOLS, add_generation_prompt=True,
                                                        enable_thinking=False)
    assert answer["prompt_text"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


@pytest.mark.parametrize("path", PATHS)
async def test_a_stream_sends_it_on_its_first_chunk(stack, path):
    client, _ = stack
    body = {"messages": MESSAGES[1:2], "return_prompt_text": True, "stream": True, "n": 2}
    response = await client.post(path, json=body)
    chunks = [json.loads(line[6:]) for line in (await response.text()).splitlines() if line.startswith("data: {")]
    assert chunks[0]["prompt_text"] == transformers_render(MESSAGES[1:2], add_generation_prompt=True)
    assert not any("prompt_text" in chunk for chunk in chunks[1:])


async def test_without_it_there_is_none_and_a_non_boolean_is_a_400(stack):
    client, _ = stack
    answer = await (await client.post("/v1/chat/completions", json={"messages": MESSAGES})).json()
    assert "prompt_text" not in answer
    response = await client.post("/v1/chat/completions", json={"messages": MESSAGES, "return_prompt_text": "perhaps"})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "return_prompt_text"
