"""/v1/responses background mode (fake scheduler), as OpenAI's background guide and API reference describe it: create
with background true answers at once (queued, or in_progress once admitted) while the generation runs on; the
response is polled with GET until it leaves queued / in_progress; POST .../cancel ends a running one (status
cancelled, its output so far kept) and answers a finished one as it is; only a background response can be cancelled
(vLLM's cancel_responses: "Cannot cancel a synchronous response."). Before, background true was a 400. The openai
SDK's own calls (responses.create / retrieve / cancel / delete / input_items.list) run against it too."""
import asyncio

import pytest
from openai import AsyncOpenAI, BadRequestError, NotFoundError
from openai.types.responses import Response

from tests.unit.responses_calls import NO_THINK, call_model as call
from tests.unit.spec_oracle import strict


async def poll(client, response_id: str) -> dict:
    for _ in range(400):
        _, read = await call(client, "GET", f"/v1/responses/{response_id}")
        if read["status"] not in ("queued", "in_progress"):
            return read
        await asyncio.sleep(0.01)
    raise AssertionError(f"still {read['status']}")


async def text_so_far(client, response_id: str) -> None:
    """Waits until the running response has some output text (a loaded machine may take a while to the first)."""
    for _ in range(500):
        _, read = await call(client, "GET", f"/v1/responses/{response_id}")
        if read["output"] and read["output"][0]["content"] and read["output"][0]["content"][0]["text"]:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no output yet")


async def stopped(fake) -> None:
    """Waits until the fake scheduler runs nothing (its cancelled call's end runs a moment after the cancel)."""
    for _ in range(500):
        if fake.num_running == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{fake.num_running} still running")


async def test_a_background_response_is_answered_at_once_and_polled_to_its_end(stack):
    client, fake = stack
    fake.script.reply, fake.script.delay_s = "one two three", 0.02
    status, created = await call(client, "POST", "/v1/responses", {"input": "Count", "background": True})
    assert status == 200 and created["background"] is True and created["status"] in ("queued", "in_progress")
    assert created["output"] == [] and created["usage"] is None and strict(Response, created) == []
    done = await poll(client, created["id"])
    assert done["status"] == "completed" and done["background"] is True
    assert done["output"][0]["content"][0]["text"] == "one two three" and done["usage"]["output_tokens"] > 0
    assert strict(Response, done) == []
    # A finished background response's cancel is that response, unchanged.
    status, again = await call(client, "POST", f"/v1/responses/{created['id']}/cancel")
    assert status == 200 and again == done


async def test_cancel_ends_a_running_background_response_with_its_output_so_far(stack):
    client, fake = stack
    fake.script.reply, fake.script.delay_s = " ".join(f"w{i}" for i in range(200)), 0.01
    _, created = await call(client, "POST", "/v1/responses", {"input": "Go", "background": True})
    await text_so_far(client, created["id"])
    status, cancelled = await call(client, "POST", f"/v1/responses/{created['id']}/cancel")
    assert status == 200 and cancelled["status"] == "cancelled" and cancelled["background"] is True
    text = cancelled["output"][0]["content"][0]["text"]
    assert text and fake.script.reply.startswith(text) and text != fake.script.reply
    assert strict(Response, cancelled) == []
    await stopped(fake)
    status, read = await call(client, "GET", f"/v1/responses/{created['id']}")
    assert read == cancelled
    assert (await call(client, "POST", f"/v1/responses/{created['id']}/cancel"))[1] == cancelled


async def test_only_a_background_response_can_be_cancelled(stack):
    client, _ = stack
    _, created = await call(client, "POST", "/v1/responses", {"input": "Hi"})
    status, error = await call(client, "POST", f"/v1/responses/{created['id']}/cancel")
    assert status == 400 and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["param"] == "response_id" and "background" in error["error"]["message"]
    assert (await call(client, "GET", f"/v1/responses/{created['id']}"))[1]["status"] == "completed"


async def test_background_that_cannot_be_kept_is_a_400(stack):
    client, fake = stack
    status, error = await call(client, "POST", "/v1/responses", {"input": "Hi", "background": True, "store": False})
    assert status == 400 and error["error"]["param"] == "background" and fake.script.requests == []


async def test_deleting_a_running_background_response_cancels_it(stack):
    client, fake = stack
    fake.script.reply, fake.script.delay_s = " ".join(f"w{i}" for i in range(200)), 0.01
    _, created = await call(client, "POST", "/v1/responses", {"input": "Go", "background": True})
    status, deleted = await call(client, "DELETE", f"/v1/responses/{created['id']}")
    assert status == 200 and deleted == {"id": created["id"], "object": "response", "deleted": True}
    await stopped(fake)
    assert (await call(client, "GET", f"/v1/responses/{created['id']}"))[0] == 404


async def test_the_openai_sdk_reads_back_deletes_and_cancels(stack):
    client, fake = stack
    sdk = AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="x", max_retries=0)
    fake.script.reply = "Seven"
    created = await sdk.responses.create(model="fake-model", input="A prime?", reasoning={"effort": "none"})
    assert (await sdk.responses.retrieve(created.id)) == created
    items = [item async for item in sdk.responses.input_items.list(created.id, limit=1)]
    assert [item.content[0].text for item in items] == ["A prime?"]
    with pytest.raises(BadRequestError):
        await sdk.responses.cancel(created.id)
    assert await sdk.responses.delete(created.id) is None
    with pytest.raises(NotFoundError):
        await sdk.responses.retrieve(created.id)
    fake.script.reply, fake.script.delay_s = " ".join(f"w{i}" for i in range(200)), 0.01
    queued = await sdk.responses.create(model="fake-model", input="Go", background=True, reasoning={"effort": "none"})
    assert queued.status in ("queued", "in_progress")
    assert (await sdk.responses.cancel(queued.id)).status == "cancelled"
    await sdk.close()


async def test_a_background_response_whose_client_left_before_the_answer_runs_to_its_end(stack):
    """The create waits a moment for the scheduler's admission before it answers; a client that left during it (a
    short timeout) left the response held in_progress for ever, its generation never read nor closed
    (sparkinfer_gateway_requests_in_flight stayed 1). It runs on, as when its client leaves later, and is kept under
    the id its request_id named."""
    from gateway import metrics

    client, fake = stack
    fake.script.say_admitted, fake.script.first_delay_s = False, {0: 0.5}
    in_flight = metrics.REQUESTS_IN_FLIGHT._value.get()
    body = {"model": "fake-model", **NO_THINK, "input": "hi", "background": True, "request_id": "resp_left_early"}
    create = asyncio.create_task(client.post("/v1/responses", json=body))
    for _ in range(500):    # the create waits for its admission now (the scheduler has its call)
        if fake.script.requests:
            break
        await asyncio.sleep(0.01)
    create.cancel()
    with pytest.raises(asyncio.CancelledError):
        await create
    read = await poll(client, "resp_left_early")
    assert read["status"] == "completed" and read["output"][0]["content"][0]["text"] == "Hello world"
    assert metrics.REQUESTS_IN_FLIGHT._value.get() == in_flight
