"""/v1/responses: a Chat Completions field that the Responses API names otherwise (response_format, max_tokens,
max_completion_tokens) is OpenAI's 400 pointing at the new name. It was logged as an unknown field and dropped, so a
client asking for JSON got free text (lmstudio-bug-tracker#2403) and one asking for a limit got none."""
import orjson
import pytest

SCHEMA = {"type": "object", "properties": {"joke": {"type": "string"}}, "required": ["joke"]}
BASE = {"model": "fake-model", "input": "Tell me a joke.", "reasoning": {"effort": "none"}}
REPLY = '{"joke": "knock knock"}'


@pytest.mark.parametrize("field,value,moved_to", [
    ("response_format", {"type": "json_schema", "json_schema": {"name": "joke", "schema": SCHEMA}}, "text.format"),
    ("response_format", {"type": "json_object"}, "text.format"),
    ("max_tokens", 5, "max_output_tokens"),
    ("max_completion_tokens", 5, "max_output_tokens")], ids=["json_schema", "json_object", "max_tokens", "max_comp"])
@pytest.mark.parametrize("route", ["/v1/responses", "/v1/responses/input_tokens"])
async def test_a_chat_field_is_refused_with_its_new_name(stack, field, value, moved_to, route):
    client, fake = stack
    response = await client.post(route, data=orjson.dumps({**BASE, field: value}))
    error = orjson.loads(await response.read())["error"]
    assert response.status == 400 and not fake.script.requests
    assert error["message"] == (f"Unsupported parameter: '{field}'. In the Responses API, this parameter has moved to "
                                f"'{moved_to}'. Try again with the new parameter.")
    assert (error["param"], error["code"], error["type"]) == (field, "unsupported_parameter", "invalid_request_error")


async def test_null_ones_are_absent_and_the_new_names_work(stack):
    client, fake = stack
    body = {**BASE, "response_format": None, "max_tokens": None, "max_output_tokens": 40,
            "text": {"format": {"type": "json_schema", "name": "joke", "schema": SCHEMA}}}
    response = await client.post("/v1/responses", data=orjson.dumps(body))
    answer = orjson.loads(await response.read())
    assert response.status == 200 and answer["status"] == "completed"
    assert answer["output"][0]["content"][0]["text"] == REPLY
    assert fake.script.requests[-1].max_tokens == 40 and fake.script.requests[-1].HasField("constraint")
