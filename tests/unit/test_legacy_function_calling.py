"""OpenAI's deprecated function calling round trip: `functions` in, `function_call` out (finish_reason
function_call), and the earlier `function_call` / `function` turns read back (fake scheduler)."""
import orjson
import pytest

WEATHER = {"name": "get_weather", "description": "Weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
REPLY = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
USER = [{"role": "user", "content": "Weather in Paris?"}]
CALL = {"name": "get_weather", "arguments": '{"city": "Paris"}'}


def events(raw: bytes) -> list:
    return [orjson.loads(block[6:]) for block in raw.decode().split("\n\n") if block.startswith("data: {")]


async def test_functions_are_answered_with_a_function_call(stack):
    # OpenAI's ChatCompletionMessage.function_call ("Deprecated and replaced by tool_calls. The name and arguments of
    # a function that should be called") and finish_reason "function_call": a client of that API reads nothing else.
    client, _ = stack
    response = await client.post("/v1/chat/completions", json={"messages": USER, "functions": [WEATHER],
                                                               "enable_thinking": False})
    choice = (await response.json())["choices"][0]
    assert choice["finish_reason"] == "function_call"
    assert choice["message"] == {"role": "assistant", "content": None, "refusal": None, "reasoning_content": None,
                                 "reasoning": None,
                                 "function_call": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}


async def test_a_streamed_function_call_comes_in_its_delta(stack):
    client, _ = stack
    response = await client.post("/v1/chat/completions", json={"messages": USER, "functions": [WEATHER],
                                                               "enable_thinking": False, "stream": True})
    chunks = events(await response.read())
    deltas = [c["choices"][0]["delta"] for c in chunks]
    # As OpenAI streams it: the name (arguments ""), then the arguments in pieces.
    pieces = [d["function_call"] for d in deltas if "function_call" in d]
    assert pieces[0] == {"name": "get_weather", "arguments": ""} and all("name" not in p for p in pieces[1:])
    assert "".join(p["arguments"] for p in pieces) == '{"city":"Paris"}' and len(pieces) > 2
    assert not any("tool_calls" in d for d in deltas)
    assert chunks[-1]["choices"][0]["finish_reason"] == "function_call"


async def test_tools_still_answer_with_tool_calls(stack):
    client, _ = stack
    tools = [{"type": "function", "function": WEATHER}]
    response = await client.post("/v1/chat/completions", json={"messages": USER, "tools": tools,
                                                               "enable_thinking": False})
    choice = (await response.json())["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and "function_call" not in choice["message"]


@pytest.mark.parametrize("functions", [True, False], ids=["with-functions", "history-only"])
async def test_the_function_turns_of_a_history_are_read_as_a_call_and_its_result(stack, functions):
    # The function role answers the assistant's function_call; it was a 400 ('function' is not one of [...]) and the
    # assistant's function_call was dropped from the prompt.
    client, fake = stack
    history = USER + [{"role": "assistant", "content": None, "function_call": CALL},
                      {"role": "function", "name": "get_weather", "content": "sunny, 21 C"},
                      {"role": "user", "content": "Thanks"}]
    body = {"messages": history, "max_tokens": 2, **({"functions": [WEATHER]} if functions else {})}
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status == 200, await response.text()
    prompt = fake.tokenizer.decode(fake.script.requests[-1].prompt_token_ids, skip_special_tokens=False)
    assert ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
            "<|im_end|>\n<|im_start|>user\n<tool_response>\nsunny, 21 C\n</tool_response><|im_end|>") in prompt


@pytest.mark.parametrize("fields, error", [
    ({"function_call": {"name": "nope"}},
     ("function_call", "invalid_value", "function_call names the function 'nope', which is not in functions")),
    ({"function_call": {"name": 5}},
     ("function_call.name", "invalid_type", 'invalid value for \'function_call.name\': 5 is not of type "string"')),
    ({"functions": [WEATHER, {"description": "no name"}]},
     ("functions[1].name", "missing_required_parameter", "'functions[1].name' is a required property")),
    ({"functions": [{"name": "f", "parameters": {"type": "strng"}}]},
     ("functions[0].parameters", "invalid_function_parameters", "Invalid schema for function 'f': \"strng\" is not one "
      'of ["array", "boolean", "integer", "null", "number", "object", "string"] (at $.type)')),
], ids=["unknown-name", "name-type", "no-name", "parameters"])
async def test_errors_name_the_deprecated_fields_sent(stack, fields, error):
    """A functions request is refused under the fields it sent, as OpenAI names them (functions[1].name,
    function_call), not under the tools / tool_choice it is translated into, which its client never sent."""
    client, fake = stack
    response = await client.post("/v1/chat/completions", data=orjson.dumps({"messages": USER, "functions": [WEATHER],
                                                                            **fields}))
    assert response.status == 400
    assert await response.json() == {"error": {"message": error[2], "type": "invalid_request_error",
                                               "param": error[0], "code": error[1]}}
    assert fake.script.requests == []


@pytest.mark.parametrize("path", ["/v1/tokenize", "/tokenize", "/apply-template"])
async def test_tokenize_and_apply_template_render_the_functions_as_the_chat_route(stack, path):
    """/tokenize counts, and llama.cpp's /apply-template shows, the prompt the chat route renders for the same body:
    a deprecated functions history was a 400 there ('function' is not one of [...]) and its functions were left out
    of the prompt, while /v1/chat/completions took both."""
    client, fake = stack
    history = USER + [{"role": "assistant", "content": None, "function_call": CALL},
                      {"role": "function", "name": "get_weather", "content": "sunny, 21 C"}]
    body = {"messages": history, "functions": [WEATHER]}
    chat = await client.post("/v1/chat/completions", json={**body, "max_tokens": 2})
    assert chat.status == 200, await chat.text()
    ids = fake.script.requests[-1].prompt_token_ids
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    answer = await response.json()
    if path == "/apply-template":
        assert answer == {"prompt": fake.tokenizer.decode(ids, skip_special_tokens=False)}
        assert '"name": "get_weather"' in answer["prompt"] and "<tool_response>\nsunny, 21 C" in answer["prompt"]
    else:
        assert (answer["tokens"], answer["count"]) == (list(ids), len(ids))


async def test_tokenize_names_the_functions_sent_in_its_errors(stack):
    client, _ = stack
    response = await client.post("/v1/tokenize", json={"messages": USER, "functions": [WEATHER, {"parameters": {}}]})
    assert response.status == 400
    assert await response.json() == {"error": {"message": "'functions[1].name' is a required property",
                                               "type": "invalid_request_error", "param": "functions[1].name",
                                               "code": "missing_required_parameter"}}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/tokenize", "/api/v0/chat/completions"])
@pytest.mark.parametrize("turn, field, shown", [
    ({"role": "assistant", "content": None, "function_call": {"name": [], "arguments": "{}"}},
     "messages[1].function_call.name", "[]"),
    ({"role": "assistant", "content": None, "function_call": {"name": 5, "arguments": "{}"}},
     "messages[1].function_call.name", "5"),
    ({"role": "function", "name": {"a": None}, "content": "sunny"}, "messages[1].name", '{"a": null}'),
    ({"role": "function", "name": 5, "content": "sunny"}, "messages[1].name", "5"),
], ids=["call-list", "call-number", "result-object", "result-number"])
async def test_a_legacy_turn_whose_function_name_is_no_string_is_a_400(stack, path, turn, field, shown):
    # The names pair a function result with its call; a list or object name was a 500 "unhashable type" on every
    # route that reads the deprecated history, and a result's number name was dropped unchecked.
    client, fake = stack
    response = await client.post(path, json={"messages": USER + [turn], "max_tokens": 2})
    assert response.status == 400, await response.text()
    assert await response.json() == {"error": {
        "message": f"invalid value for '{field}': {shown} is not of type \"string\"", "type": "invalid_request_error",
        "param": field, "code": "invalid_type"}}
    assert fake.script.requests == []


async def test_apply_template_and_the_batch_route_refuse_it_too(stack):
    client, fake = stack
    turn = {"role": "assistant", "content": None, "function_call": {"name": [], "arguments": "{}"}}
    response = await client.post("/apply-template", json={"messages": USER + [turn]})
    assert response.status == 400
    assert (await response.json())["error"]["message"] == \
        "invalid value for 'messages[1].function_call.name': [] is not of type \"string\""
    batch = {"messages": [USER, USER + [turn]], "max_tokens": 2}
    response = await client.post("/v1/chat/completions/batch", json=batch)
    assert response.status == 400
    assert (await response.json())["error"]["param"] == "messages[1][1].function_call.name"
    assert fake.script.requests == []
