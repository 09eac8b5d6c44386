"""Gateway with the fake scheduler: a llama.cpp `grammar` this server cannot use is llama-server's 400 "Failed to
parse grammar" (its sampler init refuses it), then the reason. Clients match those words, case-insensitively, to stop
retrying or to fall back from response_format to tools to json_object (is_grammar_error-style checks, Unsloth's
message map); it was 'grammar is not a valid GBNF grammar: ...' and other words."""
import orjson
import pytest

BAD = [('root ::= "yes" | maybe', "not a valid GBNF grammar: Rule 'maybe' not found"),
       ('root ::= ("a"', "not a valid GBNF grammar: Expected ')'"),
       ('root ::= "a"{2,1}', "cannot be enforced by constrained decoding"),
       ('answer: "yes"', "needs a 'start' rule")]


@pytest.mark.parametrize("path,base", [("/completion", {"prompt": "hi", "n_predict": 2}),
                                       ("/v1/completions", {"prompt": "hi", "max_tokens": 2})],
                         ids=["completion", "v1"])
@pytest.mark.parametrize("grammar,reason", BAD, ids=["undefined rule", "syntax", "bad range", "no start rule"])
async def test_an_unusable_grammar_is_llama_servers_failed_to_parse(stack, path, base, grammar, reason):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**base, "grammar": grammar}))
    error = orjson.loads(await response.read())["error"]
    assert response.status == 400 and error["param"] == "grammar"
    assert error["message"].startswith("Failed to parse grammar: ") and reason in error["message"]
    assert not fake.script.requests


async def test_vllms_guided_grammar_keeps_its_own_words(stack):
    client, _ = stack
    response = await client.post("/v1/completions", data=orjson.dumps(
        {"prompt": "hi", "max_tokens": 2, "guided_grammar": 'root ::= "yes" | maybe'}))
    error = orjson.loads(await response.read())["error"]
    assert response.status == 400 and error["message"].startswith("guided_grammar is not a valid GBNF grammar")
