"""A llama.cpp client's response_format {"type": "json_schema", "json_schema": {"schema": ...}} without a name is
served, as llama-server serves it: its oaicompat_chat_params_parse reads only json_schema.schema
(tools/server/server-common.cpp), and its own test suite sends exactly that (tests/unit/test_chat_completion.py
test_completion_with_response_format, {"schema": {"const": "foooooo"}} answering "foooooo"). Here every /v1 request
got vLLM's and OpenAI's 400 'response_format.json_schema.name is a required property'; a request naming one of
llama.cpp's own fields (speaks_llama_cpp) now gets llama-server's reading, any other keeps that 400."""
import orjson
import pytest

SCHEMA = {"type": "json_schema", "json_schema": {"schema": {"const": "foooooo"}}}
ROUTES = [("/v1/chat/completions", {"messages": [{"role": "user", "content": "Write an example"}], "max_tokens": 10,
                                    "chat_template_kwargs": {"enable_thinking": False}}),
          ("/v1/completions", {"prompt": "Write an example", "max_tokens": 10})]


async def post(client, path: str, body: dict) -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("path, base", ROUTES, ids=[path for path, _ in ROUTES])
@pytest.mark.parametrize("name", [{}, {"name": None}], ids=["absent", "null"])
async def test_a_llama_cpp_clients_unnamed_schema_is_served(stack, path, base, name):
    client, fake = stack
    fmt = {**SCHEMA, "json_schema": {**SCHEMA["json_schema"], **name}}
    status, body = await post(client, path, {**base, "cache_prompt": True, "response_format": fmt})
    assert status == 200, body
    assert "foooooo" in fake.script.requests[-1].constraint.grammar


@pytest.mark.parametrize("path, base", ROUTES, ids=[path for path, _ in ROUTES])
async def test_any_other_clients_unnamed_schema_keeps_vllms_400(stack, path, base):
    client, fake = stack
    before = len(fake.script.requests)
    status, body = await post(client, path, {**base, "response_format": SCHEMA})
    assert (status, body["error"]["param"]) == (400, "response_format.json_schema.name")
    assert len(fake.script.requests) == before
