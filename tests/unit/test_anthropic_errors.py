"""Gateway over the fake scheduler: every refusal on Anthropic's routes has Anthropic's status and error body
{"type": "error", "error": {"type", "message"}, "request_id"}, before a stream starts or as its error event."""
import grpc
import orjson
import pytest

from gateway.errors import InternalError, InvalidRequest, NotImplementedApi, Overloaded, Unavailable
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.http_server import api_error_response
from tests.unit.anthropic_sse import parse_events

USER = [{"role": "user", "content": "Hi"}]
BASE = {"model": "fake-model", "max_tokens": 16, "messages": USER, "thinking": {"type": "disabled"}}
TOOL = {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
BAD_MESSAGES = "invalid_request_error"


async def expect_error(response, status: int, kind: str, fragment: str) -> dict:
    assert response.status == status, await response.text()
    assert response.headers["Content-Type"].startswith("application/json")
    body = await response.json()
    assert set(body) == {"type", "error", "request_id"} and body["type"] == "error"
    assert body["request_id"].startswith("req_") and set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] == kind and fragment in body["error"]["message"], body
    return body


def without(*names: str) -> dict:
    return {key: value for key, value in BASE.items() if key not in names}


@pytest.mark.parametrize("body, status, kind, fragment", [
    (without("max_tokens"), 400, BAD_MESSAGES, "max_tokens: Field required"),
    (without("model"), 400, BAD_MESSAGES, "model: Field required"),
    ({**BASE, "max_tokens": 0}, 400, BAD_MESSAGES, "max_tokens: 0 is less than the minimum of 1"),
    ({**BASE, "max_tokens": 5000}, 400, BAD_MESSAGES, "input length and `max_tokens` exceed context limit: "),
    ({**BASE, "model": "claude-sonnet-4-5"}, 404, "not_found_error", "The model 'claude-sonnet-4-5' does not exist"),
    ({**BASE, "messages": []}, 400, BAD_MESSAGES, "messages: [] should be non-empty"),
    ({**BASE, "messages": [{"role": "tool", "content": "x"}]}, 400, BAD_MESSAGES, 'messages.0.role: "tool" is not'),
    ({**BASE, "messages": [{"role": "system", "content": "x"}]}, 400, BAD_MESSAGES,
     "messages: at least one user or assistant message is required"),
    ({**BASE, "messages": [{"role": "user", "content": [{"type": "text", "text": "Look"}, IMAGE]}]}, 400,
     BAD_MESSAGES, "messages.0.content.1: image blocks are not supported: this model reads text only"),
    ({**BASE, "messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]}, 400, BAD_MESSAGES,
     "messages.0.content.0: document blocks are not supported"),
    ({**BASE, "messages": [*USER, {"role": "assistant", "content": "Sure "}]}, 400, BAD_MESSAGES,
     "final assistant content cannot end with trailing whitespace"),
    ({**BASE, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]},
     400, BAD_MESSAGES, "messages.0.content.0: content blocks of type 'tool_use' are not supported here"),
    ({**BASE, "temperature": 1.5}, 400, BAD_MESSAGES, "temperature: 1.5 is greater than the maximum of 1"),
    ({**BASE, "stop_sequences": ["a"] * 1025}, 400, BAD_MESSAGES, "stop_sequences: 1025 items given; at most 1024"),
    # Anthropic's 400 for an empty one (quoted in MegaGrindStone/mcp-web-ui#5); vLLM refuses it too.
    ({**BASE, "stop_sequences": ["", "\n"]}, 400, BAD_MESSAGES, "stop_sequences: each stop sequence must be non-empty"),
    ({**BASE, "system": [{"type": "image"}]}, 400, BAD_MESSAGES, "system.0: image blocks are not supported"),
    ({**BASE, "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, 400, BAD_MESSAGES,
     "tools.0.type: tool type 'web_search_20250305' is not supported"),
    ({**BASE, "mcp_servers": [{"type": "url", "url": "https://mcp.example.com/sse", "name": "example"}]}, 400,
     BAD_MESSAGES, "mcp_servers: the MCP connector is not supported (this server connects to no MCP server)"),
    ({**BASE, "tools": [{"name": "get_weather"}]}, 400, BAD_MESSAGES, "tools.0.input_schema: Field required"),
    ({**BASE, "tools": [{**TOOL, "name": "get>weather"}]}, 400, BAD_MESSAGES, "tools.0.name 'get>weather' cannot be"),
    ({**BASE, "tool_choice": {"type": "any"}}, 400, BAD_MESSAGES, "type 'any' needs a non-empty tools list"),
    ({**BASE, "tools": [TOOL], "tool_choice": {"type": "tool"}}, 400, BAD_MESSAGES, "tool_choice.name: Field required"),
    ({**BASE, "tools": [TOOL], "tool_choice": {"type": "tool", "name": "other"}}, 400, BAD_MESSAGES,
     "tool_choice names the function 'other', which is not in tools"),
    ({**BASE, "thinking": {"type": "enabled"}}, 400, BAD_MESSAGES, "thinking.budget_tokens: Field required"),
    ({**BASE, "output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "not": {}}}}}, 400,
     BAD_MESSAGES, "output_config.format cannot be enforced"),
    ({**BASE, "tools": [TOOL, TOOL]}, 400, BAD_MESSAGES, "tools: Tool names must be unique."),
    ({**BASE, "tools": [{**TOOL, "input_schema": {"type": "object", "required": ["city"]}}],
      "tool_choice": {"type": "any"}}, 400, BAD_MESSAGES, "tools.0.input_schema: required parameter 'city' has no"),
], ids=["no max_tokens", "no model", "max_tokens 0", "past the context", "unknown model", "no messages",
        "tool role", "system messages only", "image", "document", "prefill whitespace",
        "tool_use from the user", "temperature", "1025 stop sequences", "empty stop sequence", "system image", "server tool", "MCP servers",
        "no input_schema", "bad tool name", "any without tools", "tool without name", "unknown tool", "thinking without budget",
        "unenforceable format", "tool offered twice", "unenforceable input_schema"])
async def test_bad_request(stack, body, status, kind, fragment):
    client, fake = stack
    await expect_error(await client.post("/v1/messages", json=body), status, kind, fragment)
    await expect_error(await client.post("/v1/messages", json={**body, "stream": True}), status, kind, fragment)
    assert fake.script.requests == []


@pytest.mark.parametrize("raw, fragment", [
    (b"{not json", "the request body is not valid JSON"), (b"[1, 2]", "the request body must be a JSON object"),
    (b"", "the request body is empty"),
], ids=["malformed", "not an object", "empty"])
async def test_unreadable_bodies(stack, raw, fragment):
    client, _ = stack
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        response = await client.post(path, data=raw, headers={"Content-Type": "application/json"})
        await expect_error(response, 400, BAD_MESSAGES, fragment)


async def test_count_tokens_errors(stack):
    client, _ = stack
    await expect_error(await client.post("/v1/messages/count_tokens", json={"model": "fake-model"}), 400,
                       BAD_MESSAGES, "messages: Field required")
    await expect_error(await client.post("/v1/messages/count_tokens", json={"model": "gpt-4", "messages": USER}), 404,
                       "not_found_error", "The model 'gpt-4' does not exist")


async def test_routes_and_methods_in_anthropic_shape(stack):
    client, _ = stack
    await expect_error(await client.get("/v1/messages"), 405, BAD_MESSAGES, "method GET not allowed on /v1/messages")
    await expect_error(await client.post("/v1/messages/batches", json={}), 404, "not_found_error", "no route")


@pytest.mark.parametrize("code, status, kind, fragment, retry", [
    (grpc.StatusCode.RESOURCE_EXHAUSTED, 529, "overloaded_error", "waiting queue is full", "1"),
    (grpc.StatusCode.UNAVAILABLE, 503, "overloaded_error", "the model server is unavailable", "1"),
    (grpc.StatusCode.INTERNAL, 500, "api_error", "scheduler error (INTERNAL)", None),
], ids=["queue full", "scheduler down", "scheduler bug"])
async def test_scheduler_refusals(stack, code, status, kind, fragment, retry):
    client, fake = stack
    fake.script.error, fake.script.error_details = code, "waiting queue is full" if status == 529 else ""
    for stream in (False, True):
        response = await client.post("/v1/messages", json={**BASE, "stream": stream})
        await expect_error(response, status, kind, fragment)
        assert response.headers.get("Retry-After") == retry


async def test_failure_after_the_headers_is_an_error_event(stack):
    client, fake = stack
    # Slow enough that the first token is out (and with it the headers) before the worker is lost.
    fake.script.abort_after, fake.script.delay_s = 1, 0.2
    response = await client.post("/v1/messages", json={**BASE, "stream": True})
    assert response.status == 200
    events = parse_events(await response.read())
    assert [name for name, _ in events][0] == "message_start"
    name, payload = events[-1]
    assert name == "error" and payload == {"type": "error", "error": {
        "type": "overloaded_error", "message": "the request was aborted by the model server (worker lost?)"}}


@pytest.mark.parametrize("error, status, kind", [
    (InvalidRequest("bad"), 400, BAD_MESSAGES), (Overloaded("full", retry_after=3), 529, "overloaded_error"),
    (Unavailable("down"), 503, "overloaded_error"), (NotImplementedApi("no"), 501, "api_error"),
    (InternalError("bug"), 500, "api_error"),
], ids=["400", "queue full", "503", "501", "500"])
def test_error_shape_by_path(error, status, kind):
    """What the HTTP layer answers on these paths (also for requests its parser refuses), by status."""
    response = api_error_response("/v1/messages", error)
    body = orjson.loads(response.body)
    assert response.status == status and body["error"] == {"type": kind, "message": error.message}
    assert response.headers.get("Retry-After") == ("3" if status == 529 else error.headers.get("Retry-After"))
    assert orjson.loads(api_error_response("/v1/chat/completions", error).body)["error"]["message"] == error.message


async def test_api_key_from_x_api_key_or_bearer():
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    async with fake_gateway(fake, api_key="sekret") as (client, _):
        await expect_error(await client.post("/v1/messages", json=BASE), 401, "authentication_error",
                           "send 'x-api-key: <key>' or 'Authorization: Bearer <key>'")
        await expect_error(await client.post("/v1/messages", json=BASE, headers={"x-api-key": "wrong"}), 401,
                           "authentication_error", "missing or invalid API key")
        for headers in ({"x-api-key": "sekret"}, {"Authorization": "Bearer sekret"}):
            headers["anthropic-version"] = "2023-06-01"
            response = await client.post("/v1/messages", json=BASE, headers=headers)
            assert response.status == 200 and (await response.json())["type"] == "message"
        # x-api-key is Anthropic's header: the OpenAI routes still take the Bearer token only.
        response = await client.post("/v1/chat/completions", json={"messages": USER}, headers={"x-api-key": "sekret"})
        assert response.status == 401 and (await response.json())["error"]["code"] == "invalid_api_key"


async def test_body_too_large_is_request_too_large():
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    async with fake_gateway(fake, max_body_bytes=2048) as (client, _):
        body = {**BASE, "system": "x" * 4096}
        await expect_error(await client.post("/v1/messages", json=body), 413, "request_too_large", "too large")


@pytest.mark.parametrize("path, body, headers", [
    ("/v1/messages", BASE, {"x-api-key": "clé"}),
    ("/v1/messages", BASE, {"Authorization": "Bearer clé"}),
    ("/v1/chat/completions", {"messages": USER}, {"Authorization": "Bearer clé"}),
], ids=["x-api-key", "anthropic bearer", "openai bearer"])
async def test_non_ascii_key_is_a_401_not_a_500(path, body, headers):
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    async with fake_gateway(fake, api_key="sekret") as (client, _):
        response = await client.post(path, json=body, headers=headers)
        assert response.status == 401
        error = (await response.json())["error"]
        assert error["type"] == "authentication_error" and "missing or invalid API key" in error["message"]


CALL = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
THOUGHT = {"type": "thinking", "thinking": "Hmm.", "signature": "sig_1"}


@pytest.mark.parametrize("body, message", [
    ({**BASE, "messages": [*USER, {"role": "assistant", "content": [{**THOUGHT, "signature": 5}, {
        "type": "text", "text": "Hi"}]}, *USER]}, 'messages.1.content.0.signature: 5 is not of type "string", "null"'),
    ({**BASE, "tools": [TOOL], "messages": [*USER, {"role": "assistant", "content": [CALL]}, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny", "is_error": "yes"}]}]},
     'messages.2.content.0.is_error: "yes" is not of type "boolean", "null"'),
    ({**BASE, "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi", "cache_control": 5}]}]},
     'messages.0.content.0.cache_control: 5 is not of type "object", "null"'),
    ({**BASE, "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
     'messages.0.content.0.text: 5 is not of type "string", "null"'),
    ({**BASE, "system": 123}, 'system: 123 is not of type "string", "array"'),
    ({**BASE, "messages": [{"role": "user", "content": 5}]}, 'messages.0.content: 5 is not of type "string", "array"'),
], ids=["signature number", "is_error string", "cache_control number", "text number", "system number",
        "content number"])
async def test_a_block_field_of_the_wrong_type_is_a_400_naming_it(stack, body, message):
    """vLLM's AnthropicContentBlock (entrypoints/anthropic/protocol.py) types every block field (text, thinking,
    signature, tool_use_id: str; input, cache_control: dict; is_error: bool) and answers another type with a 400;
    here a wrong signature, is_error or cache_control was ignored (a 200), and a content or system of the wrong type
    was 'is not valid under any of the given schemas', naming no field."""
    client, servicer = stack
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        response = await client.post(path, json=body)
        error = await expect_error(response, 400, BAD_MESSAGES, message)
        assert error["error"]["message"] == message
    assert servicer.script.requests == []


@pytest.mark.parametrize("path", ["/v1/v1/messages", "/v1/v1/messages/count_tokens", "/v1/v1/chat/completions"])
async def test_a_doubled_v1_prefix_is_a_404_naming_the_base_url_to_give(stack, path):
    """The Anthropic SDKs add /v1/messages to their base URL: one ending in /v1 (OpenAI's habit) asks /v1/v1/messages,
    which vLLM answers a bare 404 too (ogx-ai/ogx#6294 strips the /v1 on the client side)."""
    client, fake = stack
    response = await client.post(path, json=BASE)
    assert response.status == 404
    assert (await response.json())["error"]["message"] == (
        f"no route {path} (the base URL given to the client ends in /v1 and the client adds /v1 itself: give it the "
        f"server's address without /v1, http://host:port, as the Anthropic SDKs and Claude Code take it)")
    assert fake.script.requests == []
