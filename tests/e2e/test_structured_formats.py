"""The real stack: answers to a pydantic model's schema with date, date-time, duration and narrow exclusive number
fields validate against it (jsonschema with its format checks) and pydantic reads them, over many seeds of the random
tiny model. The grammar let 2023-02-29, second 60, 30-digit durations and the excluded bound 0 through."""
import datetime

import httpx
import jsonschema
import orjson
import pydantic
import pytest

from tests.e2e.stack import running_gateway


class Slot(pydantic.BaseModel):
    day: datetime.date
    at: datetime.datetime
    length: datetime.timedelta
    share: float = pydantic.Field(gt=0, lt=0.001)


SCHEMA = Slot.model_json_schema()


@pytest.fixture(scope="module")
def http(engine_stack):
    with running_gateway(engine_stack, {"SPARKINFER_GRAMMAR_MAX_STRING": "24"}) as url:
        with httpx.Client(base_url=url, timeout=120) as session:
            yield session


@pytest.mark.parametrize("seed", range(8))
def test_served_answers_validate_and_pydantic_reads_them(http, seed):
    body = {"messages": [{"role": "user", "content": "A slot, as JSON."}], "enable_thinking": False, "seed": seed,
            "temperature": 1.0, "max_tokens": 200,
            "response_format": {"type": "json_schema", "json_schema": {"name": "slot", "schema": SCHEMA}}}
    response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "stop"
    answer = choice["message"]["content"]
    jsonschema.validate(orjson.loads(answer), SCHEMA, format_checker=jsonschema.FormatChecker())
    assert Slot.model_validate_json(answer).share > 0
