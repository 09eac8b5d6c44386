"""text-generation-inference's response_format form, {"type": "json_object", "value": <schema>} (its GrammarType:
serde tag "type", content "value"), constrains the answer to that schema, as llama.cpp's {"type": "json_object",
"schema": ...} does. huggingface_hub's InferenceClient rewrites every OpenAI json_schema response_format into it, also
for a base_url (hf_inference.py, HFInferenceConversational._prepare_payload_as_dict), so its schema was dropped and
any JSON object came back (measured with huggingface_hub 2.4.0 on a stack on port 8310: a schema requiring
{"a": "x"} answered '{}')."""
import orjson
import pytest
from huggingface_hub import AsyncInferenceClient

from gateway.errors import InvalidRequest
from tests.unit.test_llama_cpp_response_format import SCHEMA, _constraint
from tests.unit.test_grammar_tools import accepts, card  # noqa: F401  (card is a fixture)
from tests.unit.test_strict_tools_auto import _accepts


@pytest.mark.parametrize("route", ["chat", "completions"])
def test_the_value_schema_constrains_the_answer(card, route):
    grammar = _constraint(card, route, {"type": "json_object", "value": SCHEMA}).grammar
    assert accepts(card, grammar, '{"n": 5}')
    assert not accepts(card, grammar, '{"m": 5}') and not accepts(card, grammar, "{}")


def test_a_bad_value_schema_is_a_400_naming_it(card):
    with pytest.raises(InvalidRequest) as info:
        _constraint(card, "chat", {"type": "json_object", "value": {"type": "strng"}})
    assert info.value.status == 400 and info.value.param == "response_format.value"


async def test_huggingface_hubs_inference_client_gets_its_schema(grammar_stack):
    client, fake, book = grammar_stack
    hf = AsyncInferenceClient(base_url=str(client.make_url("/v1")), api_key="unused")
    response_format = {"type": "json_schema", "json_schema": {"name": "n", "schema": SCHEMA}}
    await hf.chat_completion(model="fake-model", messages=[{"role": "user", "content": "json please"}],
                             max_tokens=16, response_format=response_format, extra_body={"enable_thinking": False})
    constraint = fake.script.requests[-1].constraint
    assert _accepts(book, constraint, '{"n": 5}', fake.eos_id)
    assert not _accepts(book, constraint, "{}", fake.eos_id)
    sent = {"messages": [{"role": "user", "content": "hi"}], "enable_thinking": False, "max_tokens": 16,
            "response_format": {"type": "json_object", "value": SCHEMA}}
    assert (await client.post("/v1/chat/completions", data=orjson.dumps(sent))).status == 200
    assert not _accepts(book, fake.script.requests[-1].constraint, "{}", fake.eos_id)
