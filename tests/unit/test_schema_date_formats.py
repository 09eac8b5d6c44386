"""JSON Schema's date, date-time and time formats: every value the grammar writes is a real calendar date and time, one
that jsonschema's format check and pydantic (the OpenAI SDK's chat.completions.parse, Ollama's examples) both read.
llguidance's own rules let 2023-02-29, year 0000 and second 60 through (gateway/schema_dates.py)."""
import datetime

import orjson
import pydantic
import pytest

from gateway.structured import validator_class
from tests.unit.grammar_card import accepts, random_answer, tiny_card


class Booking(pydantic.BaseModel):
    day: datetime.date
    at: datetime.datetime
    opens: datetime.time


BOOKING = Booking.model_json_schema()
DATE = {"type": "string", "format": "date"}
DATE_TIME = {"type": "string", "format": "date-time"}
TIME = {"type": "string", "format": "time"}


@pytest.fixture(scope="module")
def card():
    return tiny_card()


REFUSED = [("feb-29-common-year", DATE, "2023-02-29"), ("feb-29-century", DATE, "2100-02-29"),
           ("year-0", DATE, "0000-01-01"), ("date-time-feb-29", DATE_TIME, "2023-02-29T10:00:00Z"),
           ("second-60", DATE_TIME, "2024-01-01T00:00:60Z"), ("time-second-60", TIME, "23:59:60Z"),
           ("lower-case-t", DATE_TIME, "2024-01-01t00:00:00z"), ("ten-fraction-digits", TIME, "10:00:00.1234567890Z")]
ALLOWED = [("feb-29-leap-year", DATE, "2024-02-29"), ("feb-29-400", DATE, "2000-02-29"), ("year-1", DATE, "0001-01-31"),
           ("date-time-offset", DATE_TIME, "2024-02-29T23:59:59.123456789-05:30"), ("time", TIME, "08:15:00+01:00")]


@pytest.mark.parametrize("schema,value", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_the_grammar_refuses_what_is_no_date_python_reads(card, schema, value):
    assert not accepts(card, schema, orjson.dumps(value).decode())


@pytest.mark.parametrize("schema,value", [c[1:] for c in ALLOWED], ids=[c[0] for c in ALLOWED])
def test_the_grammar_allows_real_dates_and_times(card, schema, value):
    assert accepts(card, schema, orjson.dumps(value).decode())
    checker = validator_class(schema)
    assert checker(schema, format_checker=checker.FORMAT_CHECKER).is_valid(value)


def test_every_random_answer_validates_and_pydantic_reads_it(card):
    """As the random tiny model answers a pydantic model's schema (`response_format=Booking`): 60 seeds."""
    checker = validator_class(BOOKING)(BOOKING, format_checker=validator_class(BOOKING).FORMAT_CHECKER)
    answers = [answer for seed in range(60) if (answer := random_answer(card, BOOKING, seed)) is not None]
    assert len(answers) == 60
    for answer in answers:
        assert checker.is_valid(orjson.loads(answer)), answer
        assert Booking.model_validate_json(answer).day.year >= 1


class Trip(pydantic.BaseModel):
    length: datetime.timedelta
    pause: datetime.timedelta | None


OPEN = [("email", {"type": "string", "format": "email"}), ("hostname", {"type": "string", "format": "hostname"}),
        ("uri", {"type": "string", "format": "uri"}), ("duration", {"type": "string", "format": "duration"})]


@pytest.mark.parametrize("schema", [c[1] for c in OPEN], ids=[c[0] for c in OPEN])
def test_a_formatted_string_ends(card, monkeypatch, schema):
    """llguidance's email, hostname, uri and duration rules have no length: the random model wrote one until
    max_tokens (an unfinished string, no JSON). Capped like a plain string (SPARKINFER_GRAMMAR_MAX_STRING)."""
    monkeypatch.setenv("SPARKINFER_GRAMMAR_MAX_STRING", "16")
    answers = [random_answer(card, schema, seed, max_tokens=120) for seed in range(12)]
    assert None not in answers
    assert all(len(orjson.loads(answer)) <= 16 for answer in answers if schema["format"] != "duration")


def test_durations_pydantic_reads(card):
    """pydantic's timedelta ({"format": "duration"}) refused P422Y9058791589062762230128916143M: too large."""
    answers = [random_answer(card, Trip.model_json_schema(), seed) for seed in range(40)]
    assert None not in answers
    for answer in answers:
        Trip.model_validate_json(answer)


def test_a_hostname_is_at_most_253_characters(card):
    """RFC 1123's longest name (jsonschema's hostname check, fqdn, refuses a longer one); llguidance capped only each
    label (63), and a hostname is capped at SPARKINFER_GRAMMAR_MAX_STRING (1024) like an open string."""
    schema = {"type": "string", "format": "hostname"}
    name = ".".join(["a" * 63] * 4)
    assert len(name) == 255 and not accepts(card, schema, orjson.dumps(name).decode())
    assert accepts(card, schema, orjson.dumps(name[:253]).decode())
