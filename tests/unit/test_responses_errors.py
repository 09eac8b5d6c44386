"""/v1/responses refusals over the fake scheduler: each bad input with its status and OpenAI error body, the
stateless 400s and 404s, a full queue (429 before any byte), a failure mid-stream and a client that leaves."""
import asyncio

import grpc
import orjson
import pytest

from gateway.errors import ContextLengthExceeded, InternalError, InvalidRequest, Overloaded, Timeout, Unavailable
from gateway.responses_shape import response_error_code

TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]
IMAGE = {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "auto"}
# OpenAI's ResponseErrorCode (openai/openai-openapi, components.schemas.ResponseErrorCode).
RESPONSE_ERROR_CODES = {"server_error", "rate_limit_exceeded", "invalid_prompt", "data_residency_mismatch", "bio_policy",
                        "vector_store_timeout", "invalid_image", "invalid_image_format", "invalid_base64_image",
                        "invalid_image_url", "image_too_large", "image_too_small", "image_parse_error",
                        "image_content_policy_violation", "invalid_image_mode", "image_file_too_large",
                        "unsupported_image_media_type", "empty_image_file", "failed_to_download_image",
                        "image_file_not_found"}
NOT_STORED = ("this server keeps no stored prompt or vLLM state (only its recent responses and conversations, in the "
              "memory of the gateway that answered them)")
NOT_HELD = ("this server keeps its recent responses in the memory of the gateway that answered them, not those "
            "created with store: false, deleted ones, older ones or another server's")


async def post(client, body) -> tuple[int, dict, dict]:
    response = await client.post("/v1/responses", data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read()), response.headers


@pytest.mark.parametrize("body, param, code, words", [
    ({"input": [{"role": "user", "content": [IMAGE]}]}, "input[0].content[0].type", "unsupported",
     "input[0].content[0] is an input_image: this model reads text only"),
    ({"input": [{"type": "function_call_output", "call_id": "call_1", "output": [IMAGE]}]}, "input[0].call_id",
     "invalid_value", "No tool call found for function call output with call_id call_1"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens", "invalid_value",
     "max_output_tokens must be at least 1, got 0"),
    ({"input": "x", "temperature": 3}, "temperature", "invalid_value", "3 is greater than the maximum of 2"),
    ({"input": 5}, "input", "invalid_type", '5 is not of type "string", "array"'),
    ({"input": []}, "input", "invalid_value", "input must not be empty"),
    ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role", "invalid_value",
     "input[0].role must be one of user, assistant, system, developer, got 'tool'"),
    ({"input": [{"type": "computer_call", "id": "cu_1"}]}, "input[0].type", "unsupported",
     "items of type 'computer_call' are not supported"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].id", "invalid_value",
     "input[0] is an item_reference to 'msg_1', an item this server does not hold"),
    ({"input": [{"type": "function_call", "name": "get_weather", "arguments": "{}"}]}, "input[0].call_id",
     "invalid_value", "input[0].call_id must be a string"),
    ({"input": "x", "tools": [{"type": "function"}]}, "tools[0].name", "missing_required_parameter",
     "'tools[0].name' is a required property"),
    ({"input": "x", "tools": [{**TOOLS[0], "name": "bad>name"}]}, "tools[0].name", "invalid_value",
     "tools[0].name 'bad>name' cannot be written in the model's tool calls"),
    ({"input": "x", "tools": TOOLS, "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice",
     "invalid_value", "tool_choice names the function 'nope', which is not in tools"),
    ({"input": "x", "tools": TOOLS, "tool_choice": {"type": "file_search"}}, "tool_choice", "unsupported",
     "tool_choice of type 'file_search' is not supported"),
    ({"input": "x", "text": {"format": {"type": "json_schema", "name": "x"}}}, "text.format.schema",
     "missing_required_parameter", "'text.format.schema' is a required property"),
    ({"input": "x", "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "bogus"}}}},
     "text.format.schema", "invalid_value", "text.format.schema is not a valid JSON Schema"),
    ({"input": "x", "text": {"format": {"type": "yaml"}}}, "text.format.type", "invalid_value",
     "invalid value for 'text.format.type'"),
    ({"input": "x", "reasoning": {"effort": "maximum"}}, "reasoning.effort", "invalid_value",
     "invalid value for 'reasoning.effort'"),
    ({"input": "x" * 20000}, "input", "context_length_exceeded", "maximum context length is 2048 tokens"),
    ({"input": [{"role": "user", "content": "x"}] * 2048}, "input", "context_length_exceeded",
     "your input holds 2048 items"),
    ({"input": "x", "max_output_tokens": 4096}, "max_output_tokens", "context_length_exceeded",
     "With this prompt, max_output_tokens can be at most"),
    ({"input": "x", "include": ["reasoning.encrypted_content", "message.output_text.logprob"]}, "include[1]",
     "invalid_value", '"message.output_text.logprob" is not one of ["file_search_call.results"'),
], ids=["image", "image-output", "max-tokens-0", "temperature", "input-type", "input-empty", "role", "item-type",
        "item-reference", "call-without-id", "tool-without-name", "tool-name", "tool-choice-name",
        "tool-choice-type", "schema-missing", "schema-invalid", "format-type", "effort",
        "prompt-too-long", "too-many-items", "max-tokens-too-many", "include-value"])
async def test_bad_input_is_a_400_naming_the_field(stack, body, param, code, words):
    client, fake = stack
    status, error, _ = await post(client, body)
    assert status == 400, error
    assert set(error) == {"error"} and error["error"]["type"] == "invalid_request_error"
    assert (error["error"]["param"], error["error"]["code"]) == (param, code)
    assert words in error["error"]["message"]
    assert fake.script.requests == []


async def test_every_include_value_openai_lists_is_accepted(stack):
    """OpenAI's ResponseIncludable values (those for hosted tools add nothing here, as no hosted tool is served)."""
    client, _ = stack
    include = ["file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
               "message.input_image.image_url", "computer_call_output.output.image_url",
               "code_interpreter_call.outputs", "reasoning.encrypted_content", "message.output_text.logprobs"]
    status, body, _ = await post(client, {"input": "x", "include": include})
    assert status == 200 and body["status"] == "completed", body


@pytest.mark.parametrize("kind, status, code, words", [
    ({"a": 1}, 400, "invalid_type", 'invalid value for \'input[0].type\': {"a": 1} is not of type "string", "null"'),
    (["message"], 400, "invalid_type", 'invalid value for \'input[0].type\': ["message"] is not of type "string", "null"'),
    (0, 400, "invalid_type", 'invalid value for \'input[0].type\': 0 is not of type "string", "null"'),
    ("", 400, "unsupported", "input[0]: items of type '' are not supported (message, function_call, "
                             "function_call_output, custom_tool_call, custom_tool_call_output, reasoning, "
                             "agent_message, agent_reasoning, additional_tools, local_shell_call, shell_call, "
                             "apply_patch_call and their outputs are; OpenAI's hosted tools' calls and compaction "
                             "are left out)"),
], ids=["object", "list", "zero", "empty"])
async def test_an_input_item_type_that_is_no_item_type_is_a_400(stack, kind, status, code, words):
    """An item's `type` picks its handler: an object or a list there was a 500 (TypeError: unhashable type), and a
    falsy one (0, "") beside a role was read as a message (a silently wrong 200). OpenAI's item `type` is a string
    enum (openai-python ResponseInputItemParam), absent or "message" on an EasyInputMessage."""
    client, fake = stack
    body = {"model": "fake-model", "input": [{"type": kind, "role": "user", "content": "Hi"}]}
    for path in ("/v1/responses", "/v1/responses/input_tokens"):
        response = await client.post(path, data=orjson.dumps(body))
        error = orjson.loads(await response.read())
        assert response.status == status and error == {"error": {
            "message": words, "type": "invalid_request_error", "param": "input[0].type", "code": code}}, error
    assert fake.script.requests == []


@pytest.mark.parametrize("field, value, words, code", [
    ("prompt", {"id": "pmpt_1"}, "prompt refers to a stored prompt template", "responses_not_stored"),
    # vLLM's stateless multi-turn fields: taken as unknown fields, the earlier turns were dropped without a word.
    ("previous_response", {"id": "resp_1", "object": "response", "output": []},
     "previous_response passes back a response whose history only vLLM's own state carrier holds",
     "responses_not_stored"),
    ("previous_input_messages", [{"role": "user", "content": "hi"}],
     "previous_input_messages are vLLM's Harmony message history", "responses_not_stored"),
])
async def test_what_needs_a_stored_response_is_a_clear_400(stack, field, value, words, code):
    client, _ = stack
    status, error, _ = await post(client, {"input": "x", field: value})
    assert status == 400
    assert error == {"error": {"message": error["error"]["message"], "type": "invalid_request_error",
                               "param": field, "code": code}}
    assert error["error"]["message"].startswith(f"{words}, but {NOT_STORED}: ")


@pytest.mark.parametrize("method, path", [
    ("GET", "/v1/responses/resp_abc"), ("DELETE", "/v1/responses/resp_abc"),
    ("POST", "/v1/responses/resp_abc/cancel"), ("GET", "/v1/responses/resp_abc/input_items"),
], ids=["get", "delete", "cancel", "input-items"])
async def test_routes_of_a_response_not_held_are_404(stack, method, path):
    client, _ = stack
    response = await client.request(method, path)
    assert response.status == 404
    assert orjson.loads(await response.read()) == {"error": {
        "message": f"Response with id 'resp_abc' not found: {NOT_HELD}", "type": "not_found_error",
        "param": "response_id", "code": "response_not_found"}}


async def test_unknown_model_is_404(stack):
    client, _ = stack
    status, error, _ = await post(client, {"model": "gpt-5", "input": "x"})
    assert status == 404 and error["error"]["code"] == "model_not_found" and error["error"]["param"] == "model"


async def test_malformed_json_is_a_400(stack):
    client, _ = stack
    response = await client.post("/v1/responses", data=b"{not json")
    error = orjson.loads(await response.read())["error"]
    assert response.status == 400 and error["code"] == "invalid_json" and error["type"] == "invalid_request_error"


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "stream"])
async def test_a_full_queue_is_a_429_before_any_byte(stack, streamed):
    client, fake = stack
    fake.script.error = grpc.StatusCode.RESOURCE_EXHAUSTED
    status, error, headers = await post(client, {"input": "x", "stream": streamed})
    assert status == 429 and headers["Retry-After"] == "1" and headers["Content-Type"] == "application/json"
    assert error["error"]["type"] == "rate_limit_error" and error["error"]["code"] == "server_overloaded"


async def test_a_failure_mid_stream_ends_with_error_and_response_failed(stack):
    client, fake = stack
    # Slow tokens: the failure comes after the headers (a quicker one keeps its status, as the next test shows).
    fake.script.reply, fake.script.abort_after, fake.script.delay_s = "Hello world and more", 2, 0.05
    response = await client.post("/v1/responses", data=orjson.dumps(
        {"input": "x", "stream": True, "reasoning": {"effort": "none"}}))
    blocks = [b.split("\n") for b in (await response.read()).decode().split("\n\n") if b]
    events = [(name[7:], orjson.loads(data[6:])) for name, data in blocks]
    assert response.status == 200 and [name for name, _ in events[-2:]] == ["error", "response.failed"]
    error, failed = events[-2][1], events[-1][1]["response"]
    assert error["code"] == "server_unavailable" and "aborted" in error["message"]
    # response.error.code is one of OpenAI's ResponseErrorCode values (typed clients read it as a closed enum).
    assert failed["status"] == "failed" and failed["error"] == {"code": "server_error", "message": error["message"]}
    assert failed["usage"]["output_tokens"] == 2


@pytest.mark.parametrize("error, code", [
    (Unavailable("x"), "server_error"), (Timeout("x"), "server_error"), (InternalError("x"), "server_error"),
    (Overloaded("x"), "rate_limit_exceeded"), (InvalidRequest("x"), "invalid_prompt"),
    (ContextLengthExceeded("x"), "invalid_prompt")], ids=lambda v: getattr(v, "code", v))
def test_a_failed_responses_error_code_is_one_openai_lists(error, code):
    assert response_error_code(error) == code and code in RESPONSE_ERROR_CODES


async def test_a_failure_before_the_answer_is_a_503(stack):
    client, fake = stack
    fake.script.abort_after = 0
    status, error, _ = await post(client, {"input": "x"})
    assert status == 503 and error["error"]["code"] == "server_unavailable"


async def test_a_client_that_leaves_cancels_the_generation(stack):
    client, fake = stack
    fake.script.reply, fake.script.delay_s = "Hello world " * 40, 0.05
    response = await client.post("/v1/responses", data=orjson.dumps({"input": "x", "stream": True}))
    await response.content.readline()
    response.close()
    for _ in range(60):
        if fake.num_running == 0:
            break
        await asyncio.sleep(0.05)
    assert fake.num_running == 0 and len(fake.script.requests) == 1
