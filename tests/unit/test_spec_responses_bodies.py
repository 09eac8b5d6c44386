"""/v1/responses held up to OpenAI's published schemas (openai/openai-openapi openapi.yaml: Response, each member of
the ResponseStreamEvent union, TokenCountsResource, ErrorResponse; trimmed copy in spec_schemas/) and to
openai-python's types, validated strictly (Response, ResponseStreamEvent), whole and streamed, with function tools,
reasoning, text.format and logprobs. A stream's SSE event names are its events' types, its sequence_numbers count
from 0, and the SDK's accumulator (client.responses.stream's ResponseStreamState) takes it to a final response."""
import json

import pytest
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.unit.spec_oracle import branch, spec_errors, sse, strict
from tests.unit.test_spec_openai_bodies import REPLIES

TOOLS = [{"type": "function", "name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
VARIANTS = {"plain": {}, "incomplete": {"max_output_tokens": 2}, "tools": {"tools": TOOLS},
            "reasoning": {"reasoning": {"effort": "low"}}, "json": {"text": {"format": {"type": "json_object"}}},
            "logprobs": {"top_logprobs": 2, "include": ["message.output_text.logprobs"]},
            "instructions": {"instructions": "Be brief", "store": False}}
EVENT = TypeAdapter(ResponseStreamEvent)
FINAL = ("response.completed", "response.incomplete", "response.failed")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("reply", REPLIES, ids=list(REPLIES))
@pytest.mark.parametrize("variant", VARIANTS, ids=list(VARIANTS))
async def test_response_bodies_match_openais_schema(stack, variant, reply, stream):
    client, fake = stack
    fake.script.reply, fake.script.top_ids = REPLIES[reply], [5, 6, 7]
    body = {"model": "fake-model", "input": "Hi", "stream": stream, **VARIANTS[variant]}
    response = await client.post("/v1/responses", json=body)
    assert response.status == 200, await response.text()
    if not stream:
        answer = await response.json()
        assert spec_errors("openai", "Response", answer) + strict(Response, answer) == []
        return
    events = sse(await response.read())
    state = ResponseStreamState(input_tools=body.get("tools", TOOLS), text_format=omit)
    for number, (name, event) in enumerate(events):
        assert (name, event["sequence_number"]) == (event["type"], number)
        assert spec_errors("openai", branch("openai", "ResponseStreamEvent", name), event) == []
        strict_errors = []
        try:
            EVENT.validate_json(json.dumps(event), strict=True)
        except Exception as e:  # pydantic.ValidationError
            strict_errors = e.errors()
        assert strict_errors == []
        state.handle_event(EVENT.validate_python(event))
    assert events[-1][0] in FINAL and [n for n, _ in events].count(events[-1][0]) == 1


async def test_input_tokens_and_errors_match_openais_schema(stack):
    client, _ = stack
    counted = await (await client.post("/v1/responses/input_tokens", json={"model": "fake-model", "input": "Hi"})).json()
    assert spec_errors("openai", "TokenCountsResource", counted) == []
    for method, path, body in [("POST", "/v1/responses", {"model": "fake-model", "input": 3}),
                               ("GET", "/v1/responses/resp_nope", None),
                               ("POST", "/v1/responses", {"model": "fake-model", "input": "x", "background": True,
                                                         "store": False})]:
        response = await client.request(method, path, json=body)
        assert response.status in (400, 404)
        assert spec_errors("openai", "ErrorResponse", await response.json()) == []
