"""llama.cpp's grammar_lazy: its grammar applies only from the first grammar_triggers match on (tools/server
server-task.cpp params_from_json_cmpl reads grammar_lazy and grammar_triggers; common/sampling.cpp builds
llama_sampler_init_grammar_lazy_patterns, which passes every token until a trigger word or pattern appears), and with
no trigger it is llama-server's 400 'Error: no triggers set for lazy grammar!'. Here the grammar applied from the
first token: POST /completion {"prompt": "Hi", "grammar": "root ::= \"a\"", "grammar_lazy": true, "grammar_triggers":
[{"type": 1, "value": "<tool_call>"}]} answered "a" at once, where llama-server writes freely until the model writes
<tool_call> (a client running its own tool calls got every answer forced into the call). Lazy grammars are not run
here, so the request is refused, naming the field, on every route that reads llama.cpp's grammar."""
import orjson
import pytest

LAZY = {"grammar": 'root ::= "a"', "grammar_lazy": True, "grammar_triggers": [{"type": 1, "value": "<tool_call>"}]}
ROUTES = [("/completion", {"prompt": "Hi", "n_predict": 2}),
          ("/v1/completions", {"prompt": "Hi", "max_tokens": 2}),
          ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})]


async def post(client, path: str, body: dict) -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("path, base", ROUTES, ids=[path for path, _ in ROUTES])
@pytest.mark.parametrize("lazy", [LAZY, {**LAZY, "grammar_triggers": []}], ids=["triggers", "no triggers"])
async def test_a_lazy_grammar_is_refused_not_applied_from_the_first_token(stack, path, base, lazy):
    client, fake = stack
    before = len(fake.script.requests)
    status, body = await post(client, path, {**base, **lazy})
    assert status == 400, body
    assert body["error"]["param"] == "grammar_lazy" and "grammar_lazy" in body["error"]["message"]
    assert len(fake.script.requests) == before


async def test_grammar_lazy_false_is_the_grammar_from_the_first_token(stack):
    client, fake = stack
    status, body = await post(client, "/completion", {"prompt": "Hi", "n_predict": 2, **LAZY, "grammar_lazy": False})
    assert status == 200, body
    assert '"a"' in fake.script.requests[-1].constraint.grammar
