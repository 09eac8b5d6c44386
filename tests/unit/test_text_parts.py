"""Content parts read as text as vLLM reads them: OpenAI's refusal part (an assistant turn's, as openai-python types
it) and the Responses API's output_text / input_text parts that clients carry over into chat histories; they were a
400 'only text parts are supported'. Images stay a 400 (fake scheduler)."""
import pytest


def _body(parts: list, role: str = "assistant") -> dict:
    return {"messages": [{"role": "user", "content": "hi"}, {"role": role, "content": parts},
                         {"role": "user", "content": "again"}], "enable_thinking": False}


def _prompt(fake) -> str:
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


@pytest.mark.parametrize("parts, text", [
    ([{"type": "refusal", "refusal": "I cannot help with that."}], "I cannot help with that."),
    ([{"type": "output_text", "text": "Paris.", "annotations": []}], "Paris."),
    ([{"type": "text", "text": "One. "}, {"type": "refusal", "refusal": "No more."}], "One. No more."),
], ids=["refusal", "output_text", "text+refusal"])
async def test_text_like_parts_render_as_their_text(stack, parts, text):
    client, fake = stack
    response = await client.post("/v1/chat/completions", json=_body(parts))
    assert response.status == 200, await response.text()
    assert f"<|im_start|>assistant\n{text}<|im_end|>" in _prompt(fake)


async def test_input_text_in_a_user_turn(stack):
    client, fake = stack
    response = await client.post("/v1/chat/completions", json=_body([{"type": "input_text", "text": "Hello"}], "user"))
    assert response.status == 200 and "<|im_start|>user\nHello<|im_end|>" in _prompt(fake)


@pytest.mark.parametrize("part, param, code", [
    ({"type": "refusal", "refusal": 5}, "messages[1].content[0].refusal", "invalid_value"),
    ({"type": "output_text"}, "messages[1].content[0].text", "invalid_value"),
    ({"type": "image_url", "image_url": {"url": "http://x/a.png"}}, "messages[1].content[0].type", "unsupported"),
])
async def test_bad_or_non_text_parts_are_400s(stack, part, param, code):
    client, _ = stack
    response = await client.post("/v1/chat/completions", json=_body([part]))
    error = (await response.json())["error"]
    assert response.status == 400 and (error["param"], error["code"]) == (param, code)
