"""An integer the schema leaves open on a side is at most 18 digits there (it fits a signed 64-bit integer), so a
model that rambles digits still ends and Go's or Java's int64 reads the answer. llguidance's rule took any number of
digits: the random tiny model answered Ollama's format {"a": integer} with 59 digits, and {"type": "integer",
"multipleOf": 3} with 29. llama.cpp's json-schema-to-grammar (Ollama's format grammar) bounds an integer to 16
digits."""
import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.structured import ANY_OBJECT, check_answer, check_schema, validator_class
from tests.unit.grammar_card import accepts, random_answer, tiny_card

WIDEST = "9" * 18
OPEN = [("integer", {"type": "integer"}, WIDEST),
        ("from-zero", {"type": "integer", "minimum": 0}, WIDEST),
        ("up-to-five", {"type": "integer", "maximum": 5}, "-" + WIDEST),
        ("exclusive-below", {"type": "integer", "exclusiveMaximum": 5}, "-" + WIDEST),
        ("multiple-of-three", {"type": "integer", "multipleOf": 3}, WIDEST),
        ("nullable", {"type": ["integer", "null"]}, WIDEST),
        ("number", {"type": "number"}, WIDEST),
        ("positive-number", {"type": "number", "exclusiveMinimum": 0}, WIDEST),
        ("property", {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}, WIDEST),
        ("open-value", {"type": "array", "items": {}}, WIDEST),
        ("json-object", ANY_OBJECT, WIDEST)]


def _value(schema: dict, number: str) -> str:
    """number where schema puts it (a property "a", an array item, json_object's member "a")."""
    if schema is ANY_OBJECT or schema.get("properties"):
        return '{"a": ' + number + "}"
    return f"[{number}]" if schema.get("type") == "array" else number


@pytest.fixture(scope="module")
def card():
    return tiny_card()


@pytest.mark.parametrize("schema,widest", [c[1:] for c in OPEN], ids=[c[0] for c in OPEN])
def test_an_open_side_ends_at_18_digits(card, schema, widest):
    longer = widest.replace("9", "1") + "1"
    assert not accepts(card, schema, _value(schema, longer))
    assert accepts(card, schema, _value(schema, widest))


@pytest.mark.parametrize("schema,value", [({"type": "integer", "maximum": 2**62}, str(2**62)),
                                          ({"type": "integer", "minimum": 0, "maximum": 2**62}, str(2**62)),
                                                                                    ({"type": "integer", "enum": [10**15, 3]}, str(10**15))],
                         ids=["upper-bound-sent", "both-bounds-sent", "enum"])
def test_a_side_the_schema_bounds_is_kept(card, schema, value):
    assert accepts(card, schema, value)


def test_every_random_answer_validates(card):
    schema = {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 3},
                                               "b": {"type": "integer", "minimum": 7}}, "required": ["a", "b"]}
    checker = validator_class(schema)(schema)
    answers = [random_answer(card, schema, seed) for seed in range(30)]
    assert None not in answers
    assert all(checker.is_valid(orjson.loads(answer)) for answer in answers), answers


FRACTIONS = [("number", {"type": "number"}), ("from-zero", {"type": "number", "minimum": 0}),
             ("bounded", {"type": "number", "minimum": -1.5, "maximum": 2.5}),
             ("nullable", {"type": ["number", "null"]}), ("open-value", {"type": "array", "items": {}}),
             ("json-object", ANY_OBJECT)]


@pytest.mark.parametrize("schema", [c[1] for c in FRACTIONS], ids=[c[0] for c in FRACTIONS])
def test_a_number_ends_at_10_fraction_digits(card, schema):
    """The random tiny model answered {"type": "number", "minimum": 0} with
    652.798226131164917914536544310476131532054790071731534614 (llama.cpp's grammar stops at 16)."""
    assert accepts(card, schema, _value(schema, "0.1234567891"))
    assert accepts(card, schema, _value(schema, "-1.5" if schema.get("minimum") == -1.5 else "2.5"))
    assert not accepts(card, schema, _value(schema, "0.12345678912"))


@pytest.mark.parametrize("schema,value", [({"type": "number", "multipleOf": 0.5}, "2.5"),
                                          ({"type": "number", "minimum": 1e-11, "maximum": 2e-11}, "0.000000000015"),
                                          ({"type": "number", "enum": [0.123456789012]}, "0.123456789012")],
                         ids=["own-step", "finer-bounds", "enum"])
def test_a_schema_with_a_finer_step_is_served_as_sent(card, schema, value):
    assert accepts(card, schema, value)


LONG = {"type": "integer", "format": "int64", "minimum": -(2**63), "maximum": 2**63 - 1}
DOUBLE = {"type": "number", "minimum": -1.7976931348623157e308, "maximum": 1.7976931348623157e308}
FAR = [("java-long", LONG, "-" + WIDEST), ("dotnet-double-range", DOUBLE, WIDEST),
       ("float32-max", {"type": "number", "maximum": 3.4028234663852886e38}, "-" + WIDEST),
       ("nullable-1e308", {"type": ["number", "null"], "maximum": 1e308}, WIDEST),
       ("exclusive-1e20", {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1e20}, WIDEST),
       ("long-minimum", {"type": "integer", "minimum": -(2**63) + 1, "maximum": -7}, "-" + WIDEST)]


@pytest.mark.parametrize("schema,widest", [c[1:] for c in FAR], ids=[c[0] for c in FAR])
def test_a_side_bounded_past_64_bits_is_served_as_an_open_side(card, schema, widest):
    """A bound at or past the signed 64-bit range on its own side means "any such value": llguidance builds no range
    from it, so each of these was a 400 ("Failed to generate regex for float range: min=None, max=Some(1e308)",
    "... integer range: min=Some(-9223372036854775808)") for a schema any validator takes (Java's long, .NET's
    [Range(double.MinValue, double.MaxValue)]). That side ends at 18 digits, as an open side does; every answer still
    validates against the schema as sent."""
    longer, small = widest.replace("9", "1") + "1", widest[0].replace("9", "") + "7"
    assert accepts(card, schema, _value(schema, widest)) and accepts(card, schema, _value(schema, small))
    assert not accepts(card, schema, _value(schema, longer))
    checker = validator_class(schema)(schema)
    answers = [random_answer(card, schema, seed) for seed in range(8)]
    assert None not in answers and all(checker.is_valid(orjson.loads(answer)) for answer in answers), answers


def test_a_bound_past_64_bits_on_the_near_side_is_not_loosened(card):
    """A minimum of 1e19 leaves no value the grammar writes in 18 digits: the schema stays as sent (llguidance's 400),
    never read as open."""
    with pytest.raises(InvalidRequest, match="float range"):
        check_answer({"type": "number", "minimum": 1e19}, card, "response_format")


def test_a_far_bound_is_kept_where_the_other_side_passes_18_digits(card):
    """A far bound is read as open only where that side then ends at 18 digits: with the other bound past 10^18 it
    would stay open (any number of digits, past the bound sent) and llguidance refuses an integer range open there
    ("min=Some(4611686018427387904), max=None"), where it compiles the range as sent. Such a schema is kept as sent:
    it was served before far sides were read as open (the upper half of Java's long; llguidance refuses the lower
    half either way, its minimum read as -2^63)."""
    schema = {"type": "integer", "minimum": 2**62, "maximum": 2**63 - 1}
    check_answer(schema, card, "response_format")
    assert accepts(card, schema, str(2**63 - 1)) and accepts(card, schema, str(2**62))
    assert not accepts(card, schema, str(2**63))


UINT64 = [("uint64", {"type": "integer", "minimum": 0, "maximum": 2**64 - 1}),
          ("nullable-2^63", {"type": ["integer", "null"], "maximum": 2**63}),
          ("exclusive-below-2^64", {"type": "integer", "exclusiveMinimum": -(2**64), "maximum": -7})]


@pytest.mark.parametrize("schema", [c[1] for c in UINT64], ids=[c[0] for c in UINT64])
def test_an_integer_bound_past_64_bits_on_its_own_side_is_read_as_open_too(card, schema):
    """uint64's maximum (2^64 - 1) is as far as a maximum of 1.8446744073709552e19, which is read as open; written as an
    integer it was the 400 'the integer 18446744073709551615 in 'maximum' is beyond what it writes exactly', as a bound
    llguidance would clamp to 64 bits, though the grammar copy drops it. Served as the float is, within 18 digits."""
    widest = "-" + WIDEST if "exclusiveMinimum" in schema else WIDEST
    check_schema(schema, "response_format")
    check_answer(schema, card, "response_format")
    assert accepts(card, schema, widest) and not accepts(card, schema, widest.replace("9", "1") + "1")
    checker = validator_class(schema)(schema)
    answers = [random_answer(card, schema, seed) for seed in range(8)]
    assert None not in answers and all(checker.is_valid(orjson.loads(answer)) for answer in answers), answers


def test_an_integer_bound_past_64_bits_the_grammar_keeps_is_still_refused(card):
    """Where the other bound passes 18 digits the far bound is kept, and llguidance would clamp it: still the 400."""
    with pytest.raises(InvalidRequest, match="beyond what it writes exactly"):
        check_schema({"type": "integer", "minimum": 2**62, "maximum": 2**64 - 1}, "response_format")
