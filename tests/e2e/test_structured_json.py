"""End to end: JSON output on the real stack with the random tiny model: response_format (json_object, json_schema),
vLLM's guided / structured_outputs fields, response_format beside tools, Ollama's format (the tool calls, C06 / C08:
test_structured_output.py, whose gateway, client and after-each check these tests share)."""
import re

import jsonschema
import ollama
import orjson
import pytest

from tests.e2e.test_openai_api import sse_payloads
from tests.e2e.test_structured_output import (  # noqa: F401 - gateway_url, http, still_serves: fixtures
    CHAT, LED, PERSON, WEATHER, chat, check_calls, gateway_url, http, plain_calls, still_serves)


@pytest.mark.parametrize("response_format, schema", [
    ({"type": "json_object"}, {"type": "object"}),
    ({"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}, PERSON),
], ids=["json_object", "json_schema"])
def test_response_format_output_parses_and_validates(http, response_format, schema):
    body = {"messages": [{"role": "user", "content": "A person, as JSON."}], "response_format": response_format,
            "enable_thinking": False, "temperature": 0.7, "seed": 3, "max_tokens": 200}
    choice = chat(http, body)["choices"][0]
    assert choice["finish_reason"] == "stop"
    jsonschema.validate(orjson.loads(choice["message"]["content"]), schema)


def test_unenforceable_schema_is_a_400(http):
    body = {"messages": [{"role": "user", "content": "x"}], "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "not": {"type": "null"}}}}}
    response = http.post(CHAT, json=body)
    assert response.status_code == 400 and "not" in response.json()["error"]["message"]


GUIDED = [({"guided_choice": ["yes", "no"]}, r"yes|no"), ({"structured_outputs": {"choice": ["red", "blue"]}},
                                                          r"red|blue"),
          ({"guided_regex": "[0-9]{3}-[a-z]{2}"}, r"[0-9]{3}-[a-z]{2}"),
          ({"guided_grammar": 'start: "x" NUM\nNUM: /[0-9]{1,3}/'}, r"x[0-9]{1,3}")]


@pytest.mark.parametrize("field, pattern", GUIDED, ids=["choice", "so-choice", "regex", "grammar"])
def test_vllm_guided_fields_are_enforced(http, field, pattern):
    body = {"messages": [{"role": "user", "content": "Answer."}], "enable_thinking": False, "temperature": 0.9,
            "seed": 7, "max_tokens": 20, **field}
    choice = chat(http, body)["choices"][0]
    assert choice["finish_reason"] == "stop" and re.fullmatch(pattern, choice["message"]["content"])
    streamed = http.post(CHAT, json={**body, "stream": True})
    payloads = [p for p in sse_payloads(streamed.content) if p != "[DONE]"]
    text = "".join(c["delta"].get("content") or "" for p in payloads for c in p["choices"])
    assert text == choice["message"]["content"]
    completion = http.post("/v1/completions", json={"prompt": "Answer:", "max_tokens": 20, **field}).json()
    assert re.fullmatch(pattern, completion["choices"][0]["text"]), completion


@pytest.mark.parametrize("field, pattern", GUIDED[:3], ids=["choice", "so-choice", "regex"])
def test_the_guided_answer_after_thinking_is_exactly_the_choice(http, field, pattern):
    """With thinking on, the answer after </think> is exactly what the guide allows, as vLLM's structured output
    starts at the reasoning end: blanks the grammar let through there came back as "\\t  yes"."""
    for seed in range(4):
        body = {"messages": [{"role": "user", "content": "Answer."}], "thinking_token_budget": 4, "temperature": 1.0,
                "seed": seed, "max_tokens": 40, **field}
        choice = chat(http, body)["choices"][0]
        assert choice["finish_reason"] == "stop" and re.fullmatch(pattern, choice["message"]["content"]), choice


def test_guided_json_and_include_stop_str(http):
    body = {"messages": [{"role": "user", "content": "JSON"}], "enable_thinking": False, "max_tokens": 200,
            "guided_json": PERSON, "temperature": 0.7, "seed": 3}
    jsonschema.validate(orjson.loads(chat(http, body)["choices"][0]["message"]["content"]), PERSON)
    body = {"messages": [{"role": "user", "content": "x"}], "enable_thinking": False, "max_tokens": 20,
            "guided_regex": "abcde", "stop": ["c"], "include_stop_str_in_output": True}
    choice = chat(http, body)["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == ("abc", "stop")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_response_format_with_tools_gives_a_call_or_the_json(http, seed):
    rf = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    body = {"messages": [{"role": "user", "content": "Weather or a person?"}], "tools": [WEATHER],
            "response_format": rf, "enable_thinking": False, "temperature": 1.0, "seed": seed, "max_tokens": 200}
    choice = chat(http, body)["choices"][0]
    if choice["finish_reason"] == "tool_calls":
        check_calls(plain_calls(choice["message"]), {"get_weather"})
    else:
        assert choice["finish_reason"] == "stop"
        jsonschema.validate(orjson.loads(choice["message"]["content"]), PERSON)


@pytest.mark.parametrize("fmt, schema", [("json", {"type": "object"}), (PERSON, PERSON)], ids=["json", "schema"])
def test_ollama_format(gateway_url, http, fmt, schema):
    client = ollama.Client(host=gateway_url, timeout=120)
    options = {"temperature": 0.7, "seed": 5, "num_predict": 200}
    reply = client.chat(model="tiny", messages=[{"role": "user", "content": "JSON please"}], format=fmt,
                        think=False, options=options)
    assert reply.done and reply.done_reason == "stop"
    jsonschema.validate(orjson.loads(reply.message.content), schema)
    generated = client.generate(model="tiny", prompt="JSON please", format=fmt, think=False, options=options)
    jsonschema.validate(orjson.loads(generated.response), schema)


def test_ollama_tool_calls_have_object_arguments(gateway_url, http):
    lines = [orjson.loads(line) for line in http.post("/api/chat", json={
        "model": "default", "stream": True, "options": {"temperature": 0, "num_predict": 40}, "think": False,
        "messages": [{"role": "user", "content": "Please switch the LED on."}], "tools": [LED]}).content.splitlines()]
    assert lines[-1]["done"] is True
    for line in lines:
        for call in line.get("message", {}).get("tool_calls") or []:
            assert isinstance(call["function"]["arguments"], dict)
