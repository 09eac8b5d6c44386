"""End to end: the official `openai` client's Responses API against the real scheduler, worker and gateway.

The tiny model's weights are random: a function call or JSON comes out only because tool_choice and text.format
are enforced by the grammar, as on the chat route (strings capped at 24 characters, SPARKINFER_GRAMMAR_MAX_STRING).
"""
import json
import time

import httpx
import jsonschema
import openai
import pytest

from tests.e2e.stack import running_gateway

WEATHER = {"type": "function", "name": "get_weather", "description": "Weather for a city.", "strict": True,
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150}},
          "required": ["name", "age"]}
GREEDY = {"model": "tiny", "temperature": 0, "reasoning": {"effort": "none"}}


@pytest.fixture(scope="module")
def gateway_url(engine_stack):
    with running_gateway(engine_stack, {"SPARKINFER_GRAMMAR_MAX_STRING": "24"}) as url:
        yield url


@pytest.fixture(scope="module")
def client(gateway_url):
    return openai.OpenAI(base_url=f"{gateway_url}/v1", api_key="unused", timeout=120, max_retries=0)


def test_stream_and_non_stream_agree_with_usage(client, gateway_url):
    kwargs = dict(input="Say hello in three words.", instructions="Be brief.", max_output_tokens=12, **GREEDY)
    full = client.responses.create(**kwargs)
    events = list(client.responses.create(**kwargs, stream=True))
    assert full.object == "response" and full.id.startswith("resp_") and full.model == "tiny"
    assert full.status in ("completed", "incomplete") and full.output[-1].type == "message"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type == f"response.{full.status}"
    streamed = events[-1].response
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == full.output_text
    assert streamed.output_text == full.output_text and streamed.usage == full.usage
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello in three words."}]
    count = httpx.post(f"{gateway_url}/v1/tokenize", json={"messages": messages, "enable_thinking": False}).json()
    assert full.usage.input_tokens == count["count"]
    assert full.usage.total_tokens == full.usage.input_tokens + full.usage.output_tokens
    assert full.usage.output_tokens_details.reasoning_tokens == 0


def test_thinking_comes_back_as_a_reasoning_item(client):
    full = client.responses.create(model="tiny", input="Hi", max_output_tokens=8, temperature=0)
    reasoning = full.output[0]
    assert full.status == "incomplete" and full.incomplete_details.reason == "max_output_tokens"
    assert reasoning.type == "reasoning" and reasoning.summary == [] and reasoning.content[0].type == "reasoning_text"
    assert full.usage.output_tokens == 8 and 0 < full.usage.output_tokens_details.reasoning_tokens <= 8


def test_function_call_round_trip(client):
    tools = [WEATHER]
    first = client.responses.create(input="Weather in Paris?", tools=tools, max_output_tokens=80,
                                    tool_choice={"type": "function", "name": "get_weather"}, **GREEDY)
    call = first.output[0]
    assert first.status == "completed" and call.type == "function_call" and call.name == "get_weather"
    jsonschema.validate(json.loads(call.arguments), WEATHER["parameters"])
    second = client.responses.create(
        input=[{"role": "user", "content": "Weather in Paris?"}, call.model_dump(exclude_none=True),
               {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 24 C"}],
        tools=tools, max_output_tokens=6, **GREEDY)
    assert second.status in ("completed", "incomplete") and second.output[-1].type in ("message", "function_call")
    assert second.usage.input_tokens > first.usage.input_tokens


def test_json_schema_output(client):
    full = client.responses.create(input="Invent a person.", max_output_tokens=120, **GREEDY,
                                   text={"format": {"type": "json_schema", "name": "person", "schema": PERSON,
                                                    "strict": True}})
    assert full.status == "completed" and full.text.format.type == "json_schema"
    jsonschema.validate(json.loads(full.output_text), PERSON)


def test_max_output_tokens_makes_it_incomplete(client):
    full = client.responses.create(input="Count to fifty.", max_output_tokens=2, **GREEDY)
    assert full.status == "incomplete" and full.incomplete_details.reason == "max_output_tokens"
    assert full.usage.output_tokens == 2 and full.output[0].status == "incomplete"


def test_errors_raise_the_clients_exceptions(client):
    with pytest.raises(openai.BadRequestError) as image:
        client.responses.create(model="tiny", input=[{"role": "user", "content": [
            {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"}]}])
    assert image.value.status_code == 400 and image.value.body["code"] == "unsupported"
    assert image.value.body["param"] == "input[0].content[0].type"
    with pytest.raises(openai.BadRequestError) as stateful:
        client.responses.create(model="tiny", input="Hi", previous_response_id="resp_123")
    assert stateful.value.body["code"] == "previous_response_not_found"
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.retrieve("resp_123")
    assert missing.value.status_code == 404 and missing.value.body["code"] == "response_not_found"


def test_a_stored_response_is_read_back_listed_polled_and_deleted(client):
    """The SDK's stored-response calls on the real stack: retrieve is the object create returned, input_items its
    input, a background response polled to its end, delete then the 404."""
    created = client.responses.create(input="Say hello.", max_output_tokens=4, **GREEDY)
    assert client.responses.retrieve(created.id) == created
    assert [item.content[0].text for item in client.responses.input_items.list(created.id)] == ["Say hello."]
    queued = client.responses.create(input="Count.", max_output_tokens=4, background=True, **GREEDY)
    assert queued.background is True and queued.status in ("queued", "in_progress")
    for _ in range(600):
        polled = client.responses.retrieve(queued.id)
        if polled.status not in ("queued", "in_progress"):
            break
        time.sleep(0.05)
    assert polled.status == "incomplete" and polled.usage.output_tokens == 4
    assert client.responses.cancel(queued.id) == polled
    assert client.responses.delete(created.id) is None
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
