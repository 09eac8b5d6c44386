"""Reasoning efforts past the template's tiers ("max", "ultra"), as Ollama's /v1 documents and clamps them."""
import pytest

XHIGH = "Reasoning effort is set to xhigh."
USER = [{"role": "user", "content": "Hi"}]


def prompt_text(servicer) -> str:
    return servicer.tokenizer.decode(list(servicer.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


@pytest.mark.parametrize("effort", ["max", "ultra", "xhigh"])
@pytest.mark.parametrize("field", ["reasoning_effort", "reasoning"])
async def test_chat_effort_past_high_is_the_xhigh_tier(stack, field, effort):
    """Ollama's /v1 takes reasoning_effort / reasoning.effort "max" (its docs) and "ultra" (clamped to its top tier);
    both were a 400 'max' is not one of [...] here."""
    client, servicer = stack
    body = {"model": "fake-model", "messages": USER, "max_tokens": 4,
            field: effort if field == "reasoning_effort" else {"effort": effort}}
    response = await client.post("/v1/chat/completions", json=body)
    answer = await response.json()
    assert response.status == 200, answer
    assert answer["object"] == "chat.completion" and answer["choices"][0]["message"]["reasoning_content"]
    assert XHIGH in prompt_text(servicer)


async def test_responses_effort_max_is_the_xhigh_tier(stack):
    client, servicer = stack
    body = {"model": "fake-model", "input": "Hi", "max_output_tokens": 4, "reasoning": {"effort": "max"}}
    response = await client.post("/v1/responses", json=body)
    answer = await response.json()
    assert response.status == 200, answer
    assert answer["object"] == "response" and answer["reasoning"]["effort"] == "max"
    assert XHIGH in prompt_text(servicer)


async def test_an_unknown_effort_is_still_a_400_naming_the_field(stack):
    client, servicer = stack
    body = {"model": "fake-model", "messages": USER, "reasoning_effort": "maximum"}
    response = await client.post("/v1/chat/completions", json=body)
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "reasoning_effort" and '"maximum"' in error["message"]
    assert not servicer.script.requests
