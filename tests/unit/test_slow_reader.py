"""A client that reads a stream slowly, or stops reading, holds the text it has not read, not one Delta object a token
(gateway/delta_queue.py: vLLM's RequestOutputCollector merges what a slow consumer has not taken); it gets the same
text, ids and logprobs in fewer chunks. Fake scheduler; the stream's writer is held back by patching its writes."""
import asyncio
import tracemalloc

import orjson
import pytest

from gateway import http_stream
from gateway.delta_queue import MERGE_DEPTH, DeltaQueue, unfold
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.pipeline import Delta, TokenLogprob

REPLY = " ".join(f"word{i}" for i in range(400))


def _drain(queue: DeltaQueue) -> list:
    return [unfold(queue.get_nowait()) for _ in range(queue.qsize())]


def _delta(i: int, **fields) -> Delta:
    return Delta(0, content=f" w{i}", token_ids=[i], logprobs=[TokenLogprob(i, -0.5)], num_tokens=i + 1, **fields)


def test_a_lagging_queue_folds_a_choices_deltas_into_one_with_everything_in_order():
    queue = DeltaQueue()
    deltas = [_delta(i) for i in range(1000)] + [Delta(0, finish_reason="stop", stop_reason="\n", num_tokens=1000)]
    for delta in deltas:
        queue.put_nowait(delta)
    out = _drain(queue)
    # The first MERGE_DEPTH stay as they were: a reader that keeps up sees one chunk a token.
    assert len(out) == MERGE_DEPTH
    assert "".join(d.content for d in out) == "".join(f" w{i}" for i in range(1000))
    assert [t for d in out for t in d.token_ids] == list(range(1000))
    assert [e.token_id for d in out for e in d.logprobs] == list(range(1000))
    last = out[-1]
    assert (last.finish_reason, last.stop_reason, last.num_tokens) == ("stop", "\n", 1000)


def test_thinking_and_answer_other_choices_and_markers_are_never_folded_together():
    queue = DeltaQueue()
    for i in range(MERGE_DEPTH):
        queue.put_nowait(Delta(0, reasoning="r", num_tokens=i + 1))
    items = [Delta(0, reasoning="r2"), Delta(0, content="c1"), Delta(0, content="c2"), Delta(1, content="x"),
             "marker", Delta(1, content="y"), Delta(1, content="z", finish_reason="stop"), Delta(1, content="after")]
    for item in items:
        queue.put_nowait(item)
    out = _drain(queue)[MERGE_DEPTH - 1:]
    shown = [item if isinstance(item, str) else (item.index, item.reasoning, item.content, item.finish_reason)
             for item in out]
    assert shown == [(0, "rr2", "", None), (0, "", "c1c2", None), (1, "", "x", None), "marker",
                     (1, "", "yz", "stop"), (1, "", "after", None)]


def test_a_stalled_reader_costs_its_text_not_an_object_a_token():
    queue = DeltaQueue()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(20000):
            queue.put_nowait(Delta(0, content=" ab", token_ids=[7], num_tokens=i + 1))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # One Delta a token was about 380 bytes; folded, the text and an id list entry.
    assert held < 20000 * 60, held
    assert "".join(d.content for d in _drain(queue)) == " ab" * 20000


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=4096)
    fake.script.reply = REPLY
    async with fake_gateway(fake) as pair:
        yield pair


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2000, "stream": True,
                              "logprobs": True}),
    ("/api/generate", {"model": "default", "prompt": "hi", "options": {"num_predict": 2000}}),
])
async def test_a_stream_whose_writer_lags_sends_the_same_text_in_fewer_chunks(stack, monkeypatch, path, body):
    client, _ = stack
    text = b""

    async def read_all() -> tuple[list, str]:
        response = await client.post(path, data=orjson.dumps(body))
        raw = (await response.read()).decode()
        frames = [line.removeprefix("data: ") for line in raw.splitlines() if line.strip()]
        events = [orjson.loads(f) for f in frames if f != "[DONE]"]
        if path == "/api/generate":
            return events, "".join(e.get("thinking", "") + e["response"] for e in events)
        return events, "".join((c["delta"].get("reasoning_content") or "") + (c["delta"].get("content") or "")
                               for e in events for c in e["choices"])

    events, text = await read_all()
    assert REPLY in text
    write_all = http_stream._write_all

    async def lagging(response, frames):
        # The client is slow: each write waits as a full socket makes it wait.
        await asyncio.sleep(0.01)
        await write_all(response, frames)
    monkeypatch.setattr(http_stream, "_write_all", lagging)
    slow_events, slow_text = await read_all()
    assert slow_text == text
    assert len(slow_events) < len(events)
    if path == "/v1/chat/completions":
        tokens = [t["token"] for e in slow_events for c in e["choices"] for t in (c["logprobs"] or {}).get("content", [])]
        assert REPLY in "".join(tokens)
