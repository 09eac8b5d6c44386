"""End to end: enforced tool calls (C06, C08) on the real stack with the random tiny model (JSON output:
test_structured_json.py).

The tiny model's weights are random: it writes a valid call or valid JSON only because the worker masks
every token the grammar forbids. Strings the schema leaves unbounded are capped at 24 characters here
(SPARKINFER_GRAMMAR_MAX_STRING) so that each request stays a few dozen tokens.
"""

import grpc
import httpx
import jsonschema
import orjson
import pytest

from proto import pb, pb_grpc
from tests.e2e.stack import running_gateway
from tests.e2e.test_openai_api import sse_payloads

CHAT = "/v1/chat/completions"
LED = {"type": "function", "function": {"name": "switch_led_on", "description": "Switches the LED on.",
                                        "parameters": {"type": "object", "properties": {}}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a location.",
                                            "parameters": {"type": "object",
                                                           "properties": {"location": {"type": "string"}},
                                                           "required": ["location"]}}}
CALC = {"type": "function", "function": {"name": "calculate", "description": "Basic arithmetic.", "parameters": {
    "type": "object", "properties": {"operation": {"type": "string", "enum": ["add", "sub", "mul", "div"]},
                                     "x": {"type": "number"}, "y": {"type": "number"}},
    "required": ["operation", "x", "y"]}}}
C08 = {"messages": [{"role": "system", "content": "You are a helpful assistant."},
                    {"role": "user", "content": "Hello, how are you?"}],
       "tools": [CALC, WEATHER], "tool_choice": "required", "temperature": 0, "max_tokens": 300}
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150},
                                           "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
          "required": ["name", "age"]}
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in (LED, WEATHER, CALC)}


@pytest.fixture(scope="module")
def gateway_url(engine_stack):
    with running_gateway(engine_stack, {"SPARKINFER_GRAMMAR_MAX_STRING": "24"}) as url:
        yield url


@pytest.fixture(scope="module")
def http(gateway_url):
    with httpx.Client(base_url=gateway_url, timeout=120) as session:
        yield session


@pytest.fixture(autouse=True)
def still_serves(request):
    """After every test the server answers a plain request."""
    yield
    if "http" in request.fixturenames:
        session = request.getfixturevalue("http")
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "enable_thinking": False}
        assert session.post(CHAT, json=body).status_code == 200


def chat(http, body) -> dict:
    response = http.post(CHAT, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def streamed_calls(http, body) -> tuple[list, str, list]:
    """(reassembled calls [(name, arguments dict)], final finish_reason, every content delta)."""
    response = http.post(CHAT, json={**body, "stream": True})
    assert response.status_code == 200, response.text
    chunks = [e for e in sse_payloads(response.content) if e != "[DONE]" and e["choices"]]
    by_index, contents, ids = {}, [], set()
    for delta in (c["choices"][0]["delta"] for c in chunks):
        contents.append(delta.get("content") or "")
        for call in delta.get("tool_calls") or []:
            if call["index"] not in by_index:
                assert call["id"].startswith("call_") and call["type"] == "function" and call["function"]["name"]
                assert call["id"] not in ids
                ids.add(call["id"])
                by_index[call["index"]] = [call["function"]["name"], ""]
            by_index[call["index"]][1] += call["function"].get("arguments") or ""
    calls = [(name, orjson.loads(args)) for name, args in (by_index[i] for i in sorted(by_index))]
    return calls, chunks[-1]["choices"][0]["finish_reason"], contents


def plain_calls(message: dict) -> list:
    assert not message["content"]
    return [(c["function"]["name"], orjson.loads(c["function"]["arguments"])) for c in message["tool_calls"]]


def check_calls(calls: list, names: set) -> None:
    assert calls
    for name, arguments in calls:
        assert name in names and isinstance(arguments, dict)
        jsonschema.validate(arguments, SCHEMAS[name])


@pytest.mark.parametrize("tool, user", [(LED, "Please switch the LED on."),
                                        (WEATHER, "What is the weather in Paris?")], ids=["no-params", "param"])
def test_c06_streamed_call_equals_the_plain_one(http, tool, user):
    body = {"messages": [{"role": "user", "content": user}], "tools": [tool], "tool_choice": "required",
            "temperature": 0, "max_tokens": 200}
    plain = chat(http, body)["choices"][0]
    calls, finish, contents = streamed_calls(http, body)
    assert plain["finish_reason"] == finish == "tool_calls"
    assert plain_calls(plain["message"]) == calls
    check_calls(calls, {tool["function"]["name"]})
    if tool is LED:
        assert all(args == {} for _, args in calls)
        assert all(c["function"]["arguments"] == "{}" for c in plain["message"]["tool_calls"])
    assert not any("tool_call" in text or tool["function"]["name"] in text for text in contents)


def test_c08_required_plain_and_streamed(http):
    plain = chat(http, C08)["choices"][0]
    assert plain["finish_reason"] == "tool_calls"
    check_calls(plain_calls(plain["message"]), {"calculate", "get_weather"})
    calls, finish, contents = streamed_calls(http, C08)
    assert finish == "tool_calls" and not "".join(contents)
    check_calls(calls, {"calculate", "get_weather"})


SERIES = {"type": "function", "function": {"name": "plot", "description": "Plots a series.", "parameters": {
    "type": "object", "properties": {"points": {"type": "array", "items": {"type": "number"}, "minItems": 1,
                                                "maxItems": 3}}, "required": ["points"]}}}
SCHEMAS["plot"] = SERIES["function"]["parameters"]


@pytest.mark.parametrize("tool", [CALC, SERIES], ids=["plain-number", "json-number"])
@pytest.mark.parametrize("seed", [1, 2, 3, 5])
def test_forced_number_arguments_are_finite_numbers(http, tool, seed):
    """A number argument is a JSON number a double holds: the grammar let the random model write 8e691 (a plain
    number's exponent of 3 digits) or -7e54135022643151 (llguidance's JSON number), no double held it, and the
    arguments came back as {"x": "8e691"} / {"points": "[648e613, ...]"}, strings their schema refuses."""
    body = {**C08, "tools": [tool], "tool_choice": {"type": "function", "function": {"name": tool["function"]["name"]}},
            "temperature": 1.0, "seed": seed}
    plain = chat(http, body)["choices"][0]
    if plain["finish_reason"] == "length":
        pytest.skip("the call ran past max_tokens")
    assert plain["finish_reason"] == "stop"   # a named tool_choice, as OpenAI and vLLM finish it
    calls = plain_calls(plain["message"])
    check_calls(calls, {tool["function"]["name"]})
    for _, arguments in calls:
        numbers = [arguments["x"], arguments["y"]] if tool is CALC else arguments["points"]
        assert all(isinstance(n, (int, float)) and abs(n) < float("inf") for n in numbers), arguments


NULLABLE = {"type": "function", "function": {"name": "record", "description": "Records a reading.", "parameters": {
    "type": "object", "properties": {"value": {"type": ["number", "null"]}, "note": {"type": ["string", "null"]}},
    "required": ["value", "note"], "additionalProperties": False}}}
SCHEMAS["record"] = NULLABLE["function"]["parameters"]


def test_type_list_arguments_are_bounded_like_their_types(http):
    """A type list (OpenAI's strict-mode optional field) is bounded as each of its types: its number was llguidance's
    unbounded JSON number (the random model wrote 945E+3023822713, which came back as a string the schema refuses)
    and its string had no length cap (the call ran past max_tokens)."""
    for seed in range(8):
        body = {**C08, "tools": [NULLABLE], "tool_choice": "required", "temperature": 1.0, "seed": seed}
        choice = chat(http, body)["choices"][0]
        assert choice["finish_reason"] == "tool_calls", choice
        check_calls(plain_calls(choice["message"]), {"record"})


NAMED_ARGS = {"type": "function", "function": {"name": "move", "description": "Moves.", "parameters": {
    "$ref": "#/definitions/Args", "$schema": "http://json-schema.org/draft-07/schema#", "definitions": {
        "Args": {"type": "object", "properties": {"steps": {"type": "integer", "minimum": 1, "maximum": 9},
                                                 "to": {"$ref": "#/definitions/Spot"}},
                 "required": ["steps", "to"], "additionalProperties": False},
        "Spot": {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"],
                 "additionalProperties": False}}}}}
SCHEMAS["move"] = NAMED_ARGS["function"]["parameters"]


def test_parameters_behind_a_top_level_ref_are_the_call_arguments(http):
    """Parameters written as a $ref to their definition (zod-to-json-schema with a name) are that object: the grammar
    read no properties there, so the forced call came back as {} without its required arguments."""
    body = {**C08, "tools": [NAMED_ARGS], "tool_choice": {"type": "function", "function": {"name": "move"}},
            "temperature": 1.0, "seed": 1}
    choice = chat(http, body)["choices"][0]
    calls = plain_calls(choice["message"])
    assert choice["finish_reason"] == "stop" and set(calls[0][1]) == {"steps", "to"}, choice
    check_calls(calls, {"move"})


WRITE = {"type": "function", "function": {"name": "write", "description": "Writes code.", "parameters": {
    "type": "object", "properties": {"code": {"type": "string", "maxLength": 60}}, "required": ["code"]}}}


def test_a_forced_string_argument_may_hold_angle_brackets(http):
    """A string argument is any text but its closing tag: the grammar allowed no "<" at all, so a forced call could not
    write std::vector<int>, a < b or HTML (the random model writes "<" in most of these calls now)."""
    codes = []
    for seed in range(6):
        body = {**C08, "tools": [WRITE], "tool_choice": "required", "parallel_tool_calls": False, "temperature": 1.0,
                "seed": seed}
        choice = chat(http, body)["choices"][0]
        assert choice["finish_reason"] == "tool_calls", choice
        codes += [arguments["code"] for _, arguments in plain_calls(choice["message"])]
    assert any("<" in code for code in codes) and not any("</parameter>" in code for code in codes), codes


@pytest.mark.parametrize("seed", [7, 10, 12, 20])
def test_c08_named_tool_gives_exactly_that_call(http, seed):
    """A named tool_choice is one call even when sampling would go on to a second one (parallel_tool_calls left at
    its default): seeds 10, 12 and 20 wrote two calls to get_weather before the grammar allowed only one."""
    body = {**C08, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "temperature": 1.0,
            "seed": seed}
    choice = chat(http, body)["choices"][0]
    calls = plain_calls(choice["message"])
    assert len(calls) == 1 and calls[0][0] == "get_weather" and isinstance(calls[0][1]["location"], str)
    # A named tool_choice finishes "stop", streamed or not, as OpenAI and vLLM answer it.
    assert choice["finish_reason"] == "stop" and streamed_calls(http, body)[:2] == (calls, "stop")


def test_c08_none_answers_in_text(http):
    body = {**C08, "tool_choice": "none", "enable_thinking": False, "ignore_eos": True, "max_tokens": 12,
            "messages": [{"role": "user", "content": "What is the weather in Paris?"}]}
    choice = chat(http, body)["choices"][0]
    assert "tool_calls" not in choice["message"] and choice["message"]["content"]
    assert choice["finish_reason"] == "length"


@pytest.mark.parametrize("change, param", [
    ({"tools": None}, "tool_choice"),
    ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
], ids=["required-without-tools", "unknown-named-tool"])
def test_c08_bad_tool_choice_is_a_400(http, change, param):
    response = http.post(CHAT, json={**C08, **change})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param and error["message"]


def test_worker_grammar_error_fails_only_that_request(engine_stack, http):
    with grpc.insecure_channel(engine_stack.grpc_addr) as channel:
        stub = pb_grpc.ServingStub(channel)
        bad = pb.GenerateRequest(req_id="bad-grammar", prompt_token_ids=[1, 2, 3], max_tokens=4,
                                 constraint=pb.Constraint(kind="lark", grammar="start: nowhere"))
        with pytest.raises(grpc.RpcError) as info:
            list(stub.Generate(bad, timeout=30))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "nowhere" in info.value.details()
        good = pb.GenerateRequest(req_id="good", prompt_token_ids=[1, 2, 3], max_tokens=3, ignore_eos=True)
        assert sum(len(m.token_ids) for m in stub.Generate(good, timeout=30)) == 3
