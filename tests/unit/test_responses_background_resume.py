"""/v1/responses background streams resumed after the response ended (fake scheduler): a client whose connection
dropped reconnects with GET /v1/responses/{id}?stream=true&starting_after=N and reads the events after N, whether the
response still runs or ended meanwhile (vLLM's responses_background_stream_generator reads its event_store entry,
kept past the end; OpenAI's background mode resumes a stream so). Before, the events went with the response's end and
such a resume was a 400 naming stream: the client lost the end of its answer. A deleted response's are not kept."""
import orjson

from tests.unit.spec_oracle import sse
from tests.unit.test_responses_background_stream import LONG, create, poll, text_of


async def test_a_stream_resumes_after_the_response_ended(stack):
    client, fake = stack
    fake.script.reply = LONG
    created = await (await create(client)).json()
    done = await poll(client, created["id"])
    assert done["status"] == "completed"
    resumed = sse(await (await client.get(f"/v1/responses/{created['id']}?stream=true&starting_after=3")).read())
    numbers = [event["sequence_number"] for _, event in resumed]
    assert numbers == list(range(4, 4 + len(numbers))) and resumed[-1][0] == "response.completed"
    assert resumed[-1][1]["response"] == done and LONG.endswith(text_of(resumed)) and text_of(resumed)
    whole = sse(await (await client.get(f"/v1/responses/{created['id']}?stream=true")).read())
    assert whole[0][0] == "response.created" and text_of(whole) == LONG


async def test_a_deleted_response_has_no_events(stack):
    client, fake = stack
    fake.script.reply = "one two"
    created = await (await create(client)).json()
    await poll(client, created["id"])
    assert (await client.delete(f"/v1/responses/{created['id']}")).status == 200
    answer = await client.get(f"/v1/responses/{created['id']}?stream=true")
    assert answer.status == 404 and orjson.loads(await answer.read())["error"]["code"] == "response_not_found"


def test_ended_logs_keep_to_their_bound():
    """The kept logs are bounded by their bytes, least recently used out; a log past the bound is not kept."""
    from gateway.responses_replay import EndedLogs, EventLog

    def log_of(size: int) -> EventLog:
        log = EventLog()
        log.frames = [b"x" * size]
        return log

    logs = EndedLogs(max_bytes=10)
    for name in ("a", "b"):
        logs.keep(name, log_of(4))
    assert logs.get("a") is not None
    logs.keep("c", log_of(4))
    assert logs.get("b") is None and logs.get("a") and logs.get("c") and logs.num_bytes == 8
    logs.keep("d", log_of(11))
    assert logs.get("d") is None and logs.num_bytes == 8
    logs.drop("a")
    assert logs.get("a") is None and logs.num_bytes == 4
