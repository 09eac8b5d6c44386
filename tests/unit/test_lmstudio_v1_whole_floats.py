"""LM Studio /api/v1: a whole float where an integer goes (max_output_tokens 2.0, context_length 40.0, 1e3) is that
integer. LM Studio's server reads JSON as JavaScript does (JSON.parse gives 2.0 as the number 2) and checks the field
with zod's int(), which holds for any number Number.isInteger holds for; clients that hold every number as a double
(JavaScript, Dart, a Python float from a config file) send them so. They were 400 'must be a positive integer'."""
import pytest

BODY = {"model": "fake-model", "input": "Hi", "reasoning": "off"}


async def test_a_whole_float_max_output_tokens_is_that_limit(fake):
    client, servicer = fake
    servicer.script.reply = "a b c d e f g h"
    response = await client.post("/api/v1/chat", json={**BODY, "max_output_tokens": 3.0})
    answer = await response.json()
    assert response.status == 200, answer
    assert servicer.script.requests[-1].max_tokens == 3
    assert answer["stats"]["total_output_tokens"] == 3


async def test_a_whole_float_context_length_is_that_window(fake):
    client, servicer = fake
    servicer.script.reply = "a b c d e f g h i j k l m n o p"
    response = await client.post("/api/v1/chat", json={**BODY, "context_length": 4e1})
    answer = await response.json()
    assert response.status == 200, answer
    request = servicer.script.requests[-1]
    assert request.max_tokens == 40 - len(request.prompt_token_ids)
    assert answer["stats"]["input_tokens"] + answer["stats"]["total_output_tokens"] == 40


async def test_a_whole_float_load_field_is_taken(fake):
    client, _ = fake
    body = {"model": "fake-model", "context_length": 2048.0, "eval_batch_size": 512.0, "echo_load_config": True}
    response = await client.post("/api/v1/models/load", json=body)
    answer = await response.json()
    assert response.status == 200, answer
    assert answer["status"] == "loaded" and answer["load_config"]["context_length"] == 2048


@pytest.mark.parametrize("value", [2.5, 0.0, -3.0, "3", True])
async def test_a_fraction_or_other_type_is_still_the_400(fake, value):
    client, servicer = fake
    response = await client.post("/api/v1/chat", json={**BODY, "max_output_tokens": value})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "max_output_tokens"
    assert error["message"] == '"max_output_tokens" must be a positive integer'
    assert not servicer.script.requests
