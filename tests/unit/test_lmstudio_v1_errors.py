"""LM Studio 0.4's /api/v1/chat (fake scheduler): its errors name its own fields (`input`, `max_output_tokens`), never
the /v1/chat/completions ones the body is translated into."""
import re

import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway


@pytest.fixture
async def fake():
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=2048)) as pair:
        yield pair


async def test_an_output_limit_past_the_context_names_max_output_tokens(fake):
    client, servicer = fake
    response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Hi",
                                                        "max_output_tokens": 10 ** 6})
    error = (await response.json())["error"]
    assert response.status == 400 and error["code"] == "context_length_exceeded"
    assert error["param"] == "max_output_tokens"
    assert re.search(r"Please reduce the length of the prompt or of max_output_tokens \(at most \d+ here\)\.$",
                     error["message"])
    assert "max_tokens" not in error["message"].replace("max_output_tokens", "")
    assert servicer.script.requests == []


@pytest.mark.parametrize("body", [{"input": "Hi " * 3000}, {"input": "Hi", "system_prompt": "Be brief. " * 3000}],
                         ids=["input", "system prompt"])
async def test_a_prompt_past_the_context_names_input(fake, body):
    client, servicer = fake
    response = await client.post("/api/v1/chat", json={"model": "fake-model", **body})
    error = (await response.json())["error"]
    assert response.status == 400 and error["code"] == "context_length_exceeded"
    assert error["param"] == "input" and error["message"].startswith("This model's maximum context length is 2048")
    assert servicer.script.requests == []


async def test_an_output_limit_below_one_names_max_output_tokens(fake):
    client, _ = fake
    response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Hi", "max_output_tokens": 0})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "max_output_tokens"
    assert "max_output_tokens" in error["message"] and "max_tokens" not in error["message"]
