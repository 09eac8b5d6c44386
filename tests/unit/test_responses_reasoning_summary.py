"""/v1/responses with reasoning.summary asked for (fake scheduler): the reasoning item's summary is its whole text,
one summary_text part, streamed with the reasoning_summary_part / reasoning_summary_text events, as Ollama's
/v1/responses gives the thinking (openai/responses.go streams it as response.reasoning_summary_text.delta). The
clients that show a Responses model's reasoning read the summary (the Vercel AI SDK's reasoningSummary, LangChain's
reasoning={"summary": ...}, Codex's model_reasoning_summary): summary [] showed them none. Without the field the
item stays as vLLM returns it (content only)."""
import orjson
import pytest

REPLY = "<think>I ponder the question</think>Hello world"
THOUGHT = "I ponder the question"


async def frames_of(client, body: dict) -> list:
    response = await client.post("/v1/responses", data=orjson.dumps({"model": "fake-model", "input": "hi",
                                                                     "stream": True, **body}))
    assert response.status == 200
    return [orjson.loads(frame.split("data: ", 1)[1]) for frame in (await response.read()).decode().split("\n\n")
            if frame.strip()]


@pytest.mark.parametrize("summary", ["auto", "concise", "detailed"])
async def test_a_summary_asked_for_is_the_reasoning(stack, summary):
    client, _ = stack
    response = await client.post("/v1/responses", data=orjson.dumps(
        {"model": "fake-model", "input": "hi", "reasoning": {"summary": summary}}))
    body = orjson.loads(await response.read())
    item = body["output"][0]
    assert item["type"] == "reasoning" and item["summary"] == [{"type": "summary_text", "text": THOUGHT}]
    assert item["content"] == [{"type": "reasoning_text", "text": THOUGHT}]
    assert body["output"][1]["content"][0]["text"] == "Hello world" and body["reasoning"]["summary"] == summary


async def test_a_streamed_summary_comes_in_its_events(stack):
    client, _ = stack
    frames = await frames_of(client, {"reasoning": {"effort": "low", "summary": "auto"}})
    summary = [f for f in frames if f["type"].startswith("response.reasoning_summary")]
    item_id = frames[2]["item"]["id"]
    assert summary[0] == {"type": "response.reasoning_summary_part.added", "item_id": item_id, "output_index": 0,
                          "summary_index": 0, "part": {"type": "summary_text", "text": ""},
                          "sequence_number": summary[0]["sequence_number"]}
    deltas = [f["delta"] for f in summary if f["type"] == "response.reasoning_summary_text.delta"]
    assert "".join(deltas) == THOUGHT and all(f["summary_index"] == 0 for f in summary)
    assert [f["type"] for f in summary[-2:]] == ["response.reasoning_summary_text.done",
                                                 "response.reasoning_summary_part.done"]
    assert summary[-2]["text"] == THOUGHT and summary[-1]["part"] == {"type": "summary_text", "text": THOUGHT}
    done = [f["item"] for f in frames if f["type"] == "response.output_item.done"]
    assert done[0]["summary"] == [{"type": "summary_text", "text": THOUGHT}]
    assert frames[-1]["type"] == "response.completed" and frames[-1]["response"]["output"][0] == done[0]
    # the numbering stays one sequence with the summary's events in it
    assert [f["sequence_number"] for f in frames] == list(range(len(frames)))


async def test_without_a_summary_asked_for_the_item_has_none(stack):
    client, _ = stack
    frames = await frames_of(client, {"reasoning": {"effort": "low"}})
    assert not [f for f in frames if f["type"].startswith("response.reasoning_summary")]
    item = frames[-1]["response"]["output"][0]
    assert item["summary"] == [] and item["content"] == [{"type": "reasoning_text", "text": THOUGHT}]
