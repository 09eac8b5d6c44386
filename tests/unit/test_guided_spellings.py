"""vLLM's deprecated guided_* fields beside structured_outputs, their successor: the structured_outputs constraint is
the one followed, as vLLM (which read guided_* only without structured_outputs, and ignores them since 0.12) serves
it. guidance's VLLMModel sends every grammar both ways (guided_grammar and structured_outputs.grammar); that was a 400
"use one guided-decoding field" here. Another server's field beside structured_outputs is still the 400."""
import orjson
import pytest

CHAT = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "enable_thinking": False, "max_tokens": 8}
COMPLETION = {"model": "default", "prompt": "hi", "max_tokens": 8}
BODIES = {"/v1/chat/completions": CHAT, "/v1/completions": COMPLETION, "/api/v0/chat/completions": CHAT}
# What guidance's VLLMModel.grammar sends for gen(regex=...) / select(...): a Lark grammar, both ways.
GRAMMAR = '%llguidance {}\n\nstart: "yes" | "no"\n'
GUIDANCE = {"guided_decoding_backend": "guidance", "guided_grammar": GRAMMAR,
            "structured_outputs": {"grammar": GRAMMAR}}


async def post(client, path: str, body: dict):
    response = await client.post(path, data=orjson.dumps({**BODIES[path], **body}))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("path", list(BODIES))
async def test_guidances_grammar_sent_both_ways_is_followed(stack, path):
    client, fake = stack
    status, body = await post(client, path, GUIDANCE)
    assert status == 200, body
    assert fake.script.requests[0].constraint.grammar == GRAMMAR


@pytest.mark.parametrize("deprecated", [{"guided_json": {"type": "array"}}, {"guided_choice": ["a", "b"]},
                                        {"guided_regex": "[0-9]+"}, {"guided_grammar": 'start: "x"'}],
                         ids=["json", "choice", "regex", "grammar"])
async def test_structured_outputs_wins_over_a_deprecated_field(stack, deprecated):
    client, fake = stack
    status, body = await post(client, "/v1/chat/completions", {**deprecated, "structured_outputs": {"regex": "z+"}})
    assert status == 200, body
    assert fake.script.requests[0].constraint.grammar == "start: /z+/\n"


async def test_a_deprecated_field_alone_is_still_followed(stack):
    client, fake = stack
    status, body = await post(client, "/v1/completions", {"guided_regex": "z+", "structured_outputs": {}})
    assert status == 200, body
    assert fake.script.requests[0].constraint.grammar == "start: /z+/\n"


@pytest.mark.parametrize("other, param", [({"json_schema": {"type": "object"}}, "json_schema"),
                                          ({"ebnf": 'root ::= "a"'}, "ebnf")])
async def test_another_servers_field_beside_structured_outputs_is_a_400(stack, other, param):
    client, fake = stack
    status, body = await post(client, "/v1/chat/completions", {**other, "structured_outputs": {"regex": "z+"}})
    assert status == 400 and body["error"]["param"] == "structured_outputs.regex"
    assert body["error"]["message"] == f"use one guided-decoding field, not both {param} and structured_outputs.regex"
    assert not fake.script.requests
