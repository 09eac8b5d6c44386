"""/v1/responses background streams (fake scheduler), as OpenAI's background mode streams them: created with
background and stream true, the events come as a normal stream's (numbered from 0) and the response runs on when its
client leaves; GET /v1/responses/{id}?stream=true&starting_after=N resumes after event N and follows the rest (the
openai SDK's responses.retrieve(id, stream=True, starting_after=N); vLLM's responses_background_stream_generator).
Before, background with stream was a 400, and GET ?stream=true too."""
import asyncio

import orjson
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from tests.unit.spec_oracle import sse

NO_THINK = {"reasoning": {"effort": "none"}}
EVENT = TypeAdapter(ResponseStreamEvent)
LONG = " ".join(f"w{i}" for i in range(60))


async def create(client, **extra):
    return await client.post("/v1/responses", data=orjson.dumps(
        {"model": "fake-model", **NO_THINK, "input": "Go", "background": True, **extra}))


async def poll(client, response_id: str) -> dict:
    for _ in range(500):
        read = await (await client.get(f"/v1/responses/{response_id}")).json()
        if read["status"] not in ("queued", "in_progress"):
            return read
        await asyncio.sleep(0.01)
    raise AssertionError("still running")


def text_of(events: list) -> str:
    return "".join(event["delta"] for name, event in events if name == "response.output_text.delta")


async def test_a_background_stream_is_a_whole_stream_and_is_read_back(stack):
    client, fake = stack
    fake.script.reply = "one two"
    events = sse(await (await create(client, stream=True)).read())
    assert [event["sequence_number"] for _, event in events] == list(range(len(events)))
    assert events[0][0] == "response.created" and events[-1][0] == "response.completed"
    for _, event in events:
        EVENT.validate_python(event)
    final = events[-1][1]["response"]
    assert final["background"] is True and text_of(events) == "one two"
    assert await (await client.get(f"/v1/responses/{final['id']}")).json() == final


async def test_a_stream_resumes_after_the_event_it_names(stack):
    client, fake = stack
    fake.script.reply, fake.script.delay_s = LONG, 0.005
    created = await (await create(client)).json()
    resumed = sse(await (await client.get(f"/v1/responses/{created['id']}?stream=true&starting_after=3")).read())
    numbers = [event["sequence_number"] for _, event in resumed]
    assert numbers == list(range(4, 4 + len(numbers))) and resumed[-1][0] == "response.completed"
    whole = resumed[-1][1]["response"]["output"][0]["content"][0]["text"]
    assert whole == LONG and whole.endswith(text_of(resumed)) and text_of(resumed)


async def test_a_background_stream_runs_on_when_its_client_leaves(stack):
    client, fake = stack
    fake.script.reply, fake.script.delay_s = LONG, 0.005
    response = await create(client, stream=True)
    line = await response.content.readline()
    while not line.startswith(b"data: "):
        line = await response.content.readline()
    response_id = orjson.loads(line[6:])["response"]["id"]
    response.close()
    done = await poll(client, response_id)
    assert done["status"] == "completed" and done["output"][0]["content"][0]["text"] == LONG


async def test_a_cancelled_background_stream_ends_with_status_cancelled(stack):
    client, fake = stack
    fake.script.reply, fake.script.delay_s = " ".join(f"w{i}" for i in range(300)), 0.01
    created = await (await create(client)).json()
    reading = asyncio.ensure_future(client.get(f"/v1/responses/{created['id']}?stream=true"))
    await asyncio.sleep(0.1)
    cancelled = await (await client.post(f"/v1/responses/{created['id']}/cancel")).json()
    events = sse(await (await reading).read())
    assert cancelled["status"] == "cancelled" and events[-1][1]["response"]["status"] == "cancelled"
    EVENT.validate_python(events[-1][1])


async def test_only_a_running_background_response_streams_back(stack):
    client, _ = stack
    foreground = await (await client.post("/v1/responses", data=orjson.dumps(
        {"model": "fake-model", **NO_THINK, "input": "Hi"}))).json()
    answer = await client.get(f"/v1/responses/{foreground['id']}?stream=true")
    error = await answer.json()
    assert answer.status == 400 and error["error"]["param"] == "stream"
    answer = await client.get("/v1/responses/resp_nope?stream=true")
    assert answer.status == 404
    answer = await client.get(f"/v1/responses/{foreground['id']}?stream=true&starting_after=x")
    assert answer.status == 400 and (await answer.json())["error"]["param"] == "starting_after"


async def test_a_long_responses_log_keeps_its_newest_events(stack, monkeypatch):
    """Memory stays bounded: past its bytes the log lets its oldest half go; a resume from before what it keeps is a
    400 naming starting_after, one after it still streams to the end."""
    from gateway import responses_replay
    monkeypatch.setattr(responses_replay.EventLog.__init__, "__defaults__", (20000,))
    client, fake = stack
    fake.script.reply, fake.script.delay_s = " ".join(f"w{i}" for i in range(300)), 0.02
    created = await (await create(client)).json()
    for _ in range(500):
        answer = await client.get(f"/v1/responses/{created['id']}?stream=true&starting_after=0")
        if answer.status == 400:
            break
        answer.close()
        await asyncio.sleep(0.01)
    error = await answer.json()
    assert answer.status == 400 and error["error"]["param"] == "starting_after"
    # Some events past the first one kept: the log may let more go (its oldest half, some 50 events) meanwhile.
    after = int(error["error"]["message"].split("number ")[1].split(" ")[0]) + 40
    resumed = sse(await (await client.get(f"/v1/responses/{created['id']}?stream=true&starting_after={after}")).read())
    assert resumed[0][1]["sequence_number"] == after + 1 and resumed[-1][0] == "response.completed"
