"""A number schema's exclusive lower bound holds in the grammar: llguidance's rule for {"type": "number",
"exclusiveMinimum": L} with an upper bound below L + 1 (no integer in the range) let the integer L itself through, and
so for a negative whole exclusiveMaximum."""
import orjson
import pytest

from gateway.structured import validator_class
from tests.unit.grammar_card import accepts, random_answer, tiny_card

NARROW = [("zero-to-tenth", {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.1}, "0"),
          ("zero-to-half-inclusive", {"type": "number", "exclusiveMinimum": 0, "maximum": 0.5}, "0"),
          ("two-to-two-and-a-half", {"type": "number", "exclusiveMinimum": 2, "maximum": 2.5}, "2"),
          ("five-to-five-thousandth", {"type": "number", "exclusiveMinimum": 5, "exclusiveMaximum": 5.001}, "5"),
          ("below-minus-two", {"type": "number", "minimum": -2.5, "exclusiveMaximum": -2}, "-2"),
          ("below-minus-one", {"type": "number", "exclusiveMinimum": -1.5, "exclusiveMaximum": -1}, "-1"),
          ("no-type", {"exclusiveMinimum": 0, "maximum": 0.5}, "0")]


@pytest.fixture(scope="module")
def card():
    return tiny_card()


@pytest.mark.parametrize("schema,bound", [c[1:] for c in NARROW], ids=[c[0] for c in NARROW])
def test_the_exclusive_bound_is_not_written(card, schema, bound):
    assert not accepts(card, schema, bound)
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    assert accepts(card, schema, orjson.dumps(round((low + high) / 2, 6)).decode())


def test_every_random_answer_validates(card):
    """The random tiny model answered {"exclusiveMinimum": 0, "exclusiveMaximum": 0.001} with 0 in 25 of 25 seeds."""
    narrow = {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.001}
    schema = {"type": "object", "properties": {"p": narrow}, "required": ["p"]}
    checker = validator_class(schema)(schema)
    answers = [random_answer(card, schema, seed) for seed in range(30)]
    assert None not in answers
    assert all(checker.is_valid(orjson.loads(answer)) for answer in answers), answers
