"""Gateway over the fake scheduler: a /v1/messages `thread` (Anthropic's message-threads beta, server-held conversation
state) is Anthropic's 400 thread_unsupported_request, whose error.details.error_code anthropic-sdk-python's threads
read (lib/threads/_thread_state.py recovers_from): its tool runner, which sends {"type": "create"} first and then
{"type": "continue", "previous_message_id"} with only the new turn, resends that turn and every later one with the
whole conversation and no `thread`. Served as it came, a continued turn was answered as if it were the conversation.
A `compaction` request (its answer the conversation's summary alone, a compaction block) is a 400 too, not a turn."""
import pytest

from tests.unit.anthropic_sse import parse_events
from tests.unit.test_anthropic_messages import BASE, TOOLS

CREATE = {"type": "create"}
CONTINUE = {"type": "continue", "previous_message_id": "msg_4eccd222c1278ac8f55279e8"}
# What the SDK's tool runner sent as its second turn (anthropic 2.15, beta.messages.tool_runner): the tool result
# alone, no tools, tool_choice kept.
RESULT_TURN = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}


async def _refused(response) -> dict:
    assert response.status == 400, await response.text()
    body = await response.json()
    assert body["type"] == "error" and body["request_id"].startswith("req_")
    error = body["error"]
    assert error["type"] == "invalid_request_error"
    assert error["details"] == {"error_code": "thread_unsupported_request"}
    assert error["message"].startswith("thread: Threads (server-held conversation state) are not supported")
    assert "without `thread`" in error["message"]
    return error


@pytest.mark.parametrize("thread", [CREATE, CONTINUE], ids=["create", "continue"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_thread_is_refused_in_the_words_the_sdk_recovers_from(stack, thread, stream):
    client, fake = stack
    await _refused(await client.post("/v1/messages", json={**BASE, "thread": thread, "stream": stream}))
    assert fake.script.requests == []


async def test_a_continued_turn_is_not_answered_as_the_whole_conversation(stack):
    client, fake = stack
    body = {**BASE, "messages": [{"role": "user", "content": "and tomorrow?"}], "thread": CONTINUE}
    await _refused(await client.post("/v1/messages", json=body))
    body = {**BASE, "messages": [RESULT_TURN], "tool_choice": {"type": "any"}, "thread": CONTINUE}
    await _refused(await client.post("/v1/messages", json=body))
    assert fake.script.requests == []


async def test_count_tokens_refuses_a_thread_too(stack):
    client, _ = stack
    body = {key: value for key, value in BASE.items() if key != "max_tokens"}
    await _refused(await client.post("/v1/messages/count_tokens", json={**body, "thread": CONTINUE}))


async def test_the_resent_turn_without_thread_is_served(stack):
    client, _ = stack
    for body in ({**BASE, "tools": TOOLS}, {**BASE, "thread": None}):
        response = await client.post("/v1/messages", json=body)
        assert response.status == 200, await response.text()
        assert (await response.json())["content"][-1] == {"type": "text", "text": "Hello world"}
    response = await client.post("/v1/messages", json={**BASE, "stream": True})
    events = parse_events(await response.read())
    assert [name for name, _ in events][-1] == "message_stop"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_compaction_request_is_refused_not_answered_as_a_turn(stack, stream):
    # What the SDK's tool runner sends after compact_before_next_turn() (lib/tools/_beta_runner.py): the whole
    # history plus compaction; its answer must be a compaction block with stop_reason "compaction", never a reply.
    client, fake = stack
    body = {**BASE, "tools": TOOLS, "compaction": {"type": "summarize"}, "stream": stream}
    response = await client.post("/v1/messages", json=body)
    assert response.status == 400, await response.text()
    error = (await response.json())["error"]
    assert error["type"] == "invalid_request_error" and "details" not in error
    assert error["message"].startswith("compaction: server-side compaction (the conversation's summary as a "
                                       "compaction block) is not supported by this server")
    assert fake.script.requests == []
    # count_tokens ignores compaction, as Anthropic's does: the count of the conversation as sent.
    count = {key: value for key, value in body.items() if key not in ("max_tokens", "stream")}
    response = await client.post("/v1/messages/count_tokens", json=count)
    assert response.status == 200, await response.text()
    plain = {key: value for key, value in count.items() if key != "compaction"}
    expected = await (await client.post("/v1/messages/count_tokens", json=plain)).json()
    assert await response.json() == expected
