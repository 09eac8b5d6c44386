"""llama.cpp /completion's output limit: n_predict (and the names it takes for it: max_tokens, max_completion_tokens,
the value as text), 0 as prompt-only, past the context a cap that stops where the context is full (fake scheduler)."""
import orjson
import pytest

from tests.unit.test_llama_cpp_completion import REPLY, events, post  # noqa: F401 - conftest's stack reads REPLY


async def test_n_predict_zero_generates_nothing(stack):
    client, fake = stack
    status, body = await post(client, {"prompt": "hi", "n_predict": 0})
    assert (status, body["content"], body["tokens_predicted"], body["stop_type"]) == (200, "", 0, "limit")
    assert fake.script.requests == []


@pytest.mark.parametrize("fields", [{"prompt": "hi", "n_predict": 0}, {"prompt": ["hi", "a longer prompt"],
                                                                      "max_tokens": 0}], ids=["one", "two-prompts"])
async def test_a_streamed_n_predict_zero_is_an_event_stream(stack, fields):
    """llama.cpp streams every stream: true request (server-context.cpp handle_completions_impl), so n_predict 0
    streamed is each prompt's final object as a `data:` event, not a JSON body an SSE reader finds nothing in."""
    client, fake = stack
    response = await client.post("/completion", data=orjson.dumps({**fields, "stream": True}))
    assert response.status == 200 and response.content_type == "text/event-stream"
    finals = await events(client, fields)
    prompts = fields["prompt"] if isinstance(fields["prompt"], list) else [fields["prompt"]]
    assert [(f["index"], f["stop"], f["content"], f["tokens_predicted"], f["stop_type"]) for f in finals] == [
        (i, True, "", 0, "limit") for i in range(len(prompts))]
    assert [f["prompt"] for f in finals] == prompts and all(f["generation_settings"]["stream"] for f in finals)
    assert fake.script.requests == []


async def test_n_predict_past_the_context_runs_until_it_is_full(stack):
    """llama.cpp answers n_predict past the room left with the output up to the full context (stop_type limit,
    truncated: its process_token "stopped due to running out of context"); it was a 400 exceed_context_size_error."""
    client, fake = stack
    fake.script.reply = "1, " * 3000
    status, body = await post(client, {"prompt": "hi", "n_predict": 4096})
    assert status == 200, body
    room = 2048 - body["tokens_evaluated"]
    assert fake.script.requests[-1].max_tokens == room
    assert (body["tokens_predicted"], body["stop_type"], body["truncated"]) == (room, "limit", True)
    assert body["generation_settings"]["n_predict"] == 4096


@pytest.mark.parametrize("fields, sent, predicted, stop_type", [
    ({"max_tokens": 4096}, 2048, None, "limit"),
    ({"max_tokens": -1}, -1, None, "eos"),
    ({"max_tokens": 0}, 0, 0, "limit"),
    ({"max_tokens": 3}, 3, 3, "limit"),
    ({"max_tokens": 9, "n_predict": 2}, 2, 2, "limit"),
], ids=["past-the-context", "minus-one", "zero", "limit", "n_predict-wins"])
async def test_max_tokens_is_read_as_n_predict(stack, fields, sent, predicted, stop_type):
    """llama.cpp's /completion reads max_tokens as n_predict's default: its -1 is no limit, 0 the prompt only, and a
    value past the context a cap; here it was OpenAI's max_tokens (a 400 for -1 and past the context)."""
    client, fake = stack
    fake.script.reply = "1, " * 3000 if sent == 2048 else REPLY
    status, body = await post(client, {"prompt": "hi", **fields})
    assert status == 200, body
    room = 2048 - body["tokens_evaluated"]
    expected = room if predicted is None and stop_type == "limit" else predicted
    if expected is not None:
        assert body["tokens_predicted"] == expected
    assert body["stop_type"] == stop_type
    assert body["generation_settings"]["n_predict"] == (4096 if sent == 2048 else sent)


@pytest.mark.parametrize("fields, predicted", [
    ({"n_predict": "3"}, 3),
    ({"max_tokens": "3"}, 3),
    ({"n_predict": "0"}, 0),
    ({"n_predict": False}, 0),
    ({"n_predict": 3.0}, 3),
    ({"max_tokens": 3.0}, 3),
    ({"max_completion_tokens": 3.0}, 3),
    ({"n_predict": 0.0}, 0),
], ids=["string-n_predict", "string-max_tokens", "string-zero", "false-is-zero", "float-n_predict", "float-max_tokens",
        "float-max_completion_tokens", "float-zero"])
async def test_a_limit_sent_as_text_is_the_limit_applied_and_echoed(stack, fields, predicted):
    """A limit read as pydantic's lax mode reads it ("3" is 3, false 0, 3.0 is 3: nlohmann's boolean and number to
    int in llama.cpp's json_value) is one number: "3" stopped at 3 tokens while generation_settings said -1, and "0"
    was a 400; 3.0 stopped at 3 while generation_settings said -1, and max_completion_tokens 3.0 was a 400."""
    client, fake = stack
    status, body = await post(client, {"prompt": "hi", **fields})
    assert status == 200, body
    assert (body["tokens_predicted"], body["stop_type"]) == (predicted, "limit")
    assert body["generation_settings"]["n_predict"] == predicted
    assert len(fake.script.requests) == (1 if predicted else 0)


@pytest.mark.parametrize("fields, predicted", [
    ({"max_completion_tokens": 2}, 2),
    ({"max_completion_tokens": 2, "max_tokens": 5}, 2),
    ({"n_predict": 3, "max_completion_tokens": 2}, 3),
    ({"max_completion_tokens": 0}, 0),
], ids=["alone", "wins-over-max_tokens", "n_predict-wins", "zero"])
async def test_max_completion_tokens_is_read_as_n_predict(stack, fields, predicted):
    """llama.cpp's n_predict aliases, the first one sent winning: n_predict, max_completion_tokens, max_tokens
    (tools/server/server-schema.cpp); max_completion_tokens was ignored here, so the output ran to the end."""
    client, fake = stack
    status, body = await post(client, {"prompt": "hi", **fields})
    assert status == 200, body
    assert (body["tokens_predicted"], body["generation_settings"]["n_predict"]) == (predicted, predicted)
    assert [r.max_tokens for r in fake.script.requests] == ([predicted] if predicted else [])


async def test_a_bad_max_completion_tokens_is_a_400_naming_it(stack):
    client, fake = stack
    status, body = await post(client, {"prompt": "hi", "max_completion_tokens": -7})
    assert (status, body["error"]["param"]) == (400, "max_completion_tokens") and fake.script.requests == []
