"""Gateway over the fake scheduler: Anthropic's routes answer with Anthropic's request-id header, which its SDKs read
as `message._request_id` and `APIStatusError.request_id` (both were None: only X-Request-Id was sent). An error's
header is its body's request_id, req_ and the request's X-Request-Id as a success's; other APIs keep X-Request-Id
alone."""
import pytest

from tests.unit.test_anthropic_messages import BASE


@pytest.mark.parametrize("path, change", [("/v1/messages", {}), ("/v1/messages", {"stream": True}),
                                          ("/v1/messages/count_tokens", {})], ids=["whole", "streamed", "count"])
async def test_answers_carry_a_request_id(stack, path, change):
    client, fake = stack
    fake.script.reply = "Hello"
    response = await client.post(path, json={**BASE, **change})
    assert response.status == 200, await response.text()
    await response.read()
    assert response.headers["request-id"] == "req_" + response.headers["X-Request-Id"]
    traced = await client.post(path, json={**BASE, **change}, headers={"X-Request-Id": "trace-7"})
    await traced.read()
    assert traced.headers["request-id"] == "req_trace-7"


@pytest.mark.parametrize("body, status", [({**BASE, "max_tokens": 0}, 400), ({**BASE, "model": "nope"}, 404)])
async def test_an_errors_request_id_header_is_its_bodys(stack, body, status):
    client, _ = stack
    response = await client.post("/v1/messages", json=body)
    assert response.status == status
    payload = await response.json()
    assert payload["request_id"].startswith("req_") and response.headers["request-id"] == payload["request_id"]
    # One id for the request, as a success's: the access log's (X-Request-Id) is the SDK's APIStatusError.request_id.
    assert payload["request_id"] == "req_" + response.headers["X-Request-Id"]
    traced = await client.post("/v1/messages", json=body, headers={"X-Request-Id": "trace-9"})
    assert (await traced.json())["request_id"] == traced.headers["request-id"] == "req_trace-9"
    assert traced.headers["X-Request-Id"] == "trace-9"


async def test_other_apis_send_no_anthropic_header(stack):
    client, fake = stack
    fake.script.reply = "Hello"
    response = await client.post("/v1/chat/completions", json={"model": "fake-model", "max_tokens": 8,
                                                               "messages": [{"role": "user", "content": "Hi"}]})
    assert response.status == 200 and "X-Request-Id" in response.headers and "request-id" not in response.headers


async def test_a_browser_may_read_it(stack):
    """Browsers hide response headers a CORS answer does not expose: the Anthropic SDK there read no request-id."""
    client, fake = stack
    fake.script.reply = "Hello"
    response = await client.post("/v1/messages", json=BASE, headers={"Origin": "http://localhost:3000"})
    await response.read()
    exposed = [h.strip().lower() for h in response.headers["Access-Control-Expose-Headers"].split(",")]
    assert "request-id" in exposed and response.headers["request-id"].startswith("req_")

