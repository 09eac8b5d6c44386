"""A KoboldAI generate whose memory and prompt pass its context is cut as KoboldCpp cuts it (gateway/kobold_context.py,
koboldcpp.py generate and gpttype_adapter.cpp: the front of the prompt, the memory kept; the request's
max_context_length as the context when smaller), where it was a 400 and nothing ran (fake scheduler, context 2048)."""
import pytest

STORY = " ".join(f"line{i} said more." for i in range(900))


def _ids(fake, text: str) -> list:
    return fake.tokenizer.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("path", ["/api/v1/generate", "/api/extra/generate/stream"])
async def test_a_prompt_past_the_context_loses_its_front_and_keeps_the_memory(stack, path):
    client, fake = stack
    memory = "[Memory: the hero is Ana]\n"
    assert len(_ids(fake, memory + STORY)) > 2048
    response = await client.post(path, json={"prompt": STORY, "memory": memory, "max_length": 24})
    assert response.status == 200, await response.text()
    sent = list(fake.script.requests[-1].prompt_token_ids)
    memory_ids, story_ids = _ids(fake, memory), _ids(fake, STORY)
    assert len(sent) == 2048 - 24 and fake.script.requests[-1].max_tokens == 24
    assert sent == memory_ids + story_ids[len(story_ids) - (2048 - 24 - len(memory_ids)):]


async def test_the_requests_max_context_length_is_its_context(stack):
    """SillyTavern and the AI Horde send the context they count with; KoboldCpp generates within it."""
    client, fake = stack
    body = {"prompt": STORY, "max_length": 30, "max_context_length": 200}
    response = await client.post("/api/v1/generate", json=body)
    assert response.status == 200, await response.text()
    result = (await response.json())["results"][0]
    sent = list(fake.script.requests[-1].prompt_token_ids)
    assert sent == _ids(fake, STORY)[-170:] and result["prompt_tokens"] == 170


async def test_a_max_length_near_the_context_is_capped_as_koboldcpp_caps_it(stack):
    """max_length at or past the context less 16 is that, the prompt cut to the 16 tokens left (koboldcpp.py)."""
    client, fake = stack
    response = await client.post("/api/v1/generate", json={"prompt": STORY, "max_length": 5000,
                                                           "max_context_length": 300})
    assert response.status == 200, await response.text()
    request = fake.script.requests[-1]
    assert request.max_tokens == 284 and list(request.prompt_token_ids) == _ids(fake, STORY)[-16:]


async def test_a_prompt_that_fits_is_sent_as_its_text(stack):
    client, fake = stack
    response = await client.post("/api/v1/generate", json={"prompt": "You: hi\nKoboldAI:", "memory": "[M]\n",
                                                           "max_length": 8, "max_context_length": 4096})
    assert response.status == 200
    assert list(fake.script.requests[-1].prompt_token_ids) == _ids(fake, "[M]\nYou: hi\nKoboldAI:")
