"""A llama.cpp client's /v1 chat that ends with an assistant message is continued from it, as llama-server does by
default (tools/server/server-common.cpp oaicompat_chat_params_parse: prefill_assistant, on unless
--no-prefill-assistant, ggml-org/llama.cpp#13174): its web UI's Continue button sends the answer so far as that final
message (webui chat.service.ts, enableContinueGeneration). Here /v1 closed it and opened a new assistant turn, vLLM's
reading, so the web UI got a second answer instead of the rest of the first. A request naming llama.cpp's own fields
now gets llama-server's reading; any other keeps vLLM's. Oracle: llama.cpp's /apply-template, which renders
llama-server's prompt for the same messages."""
import orjson
import pytest

MESSAGES = [{"role": "user", "content": "Tell me a story"}, {"role": "assistant", "content": "Once upon a"}]
# What llama.cpp's web UI sends with every chat (its default settings), as chat.service.ts builds the body.
WEBUI = {"reasoning_format": "auto", "samplers": ["top_k", "typ_p", "top_p", "min_p", "temperature"],
         "dry_multiplier": 0.0, "repeat_last_n": 64, "max_tokens": -1}


async def prompt_of(client, fake, body: dict) -> list:
    response = await client.post("/v1/chat/completions", data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    await response.read()
    return list(fake.script.requests[-1].prompt_token_ids)


async def rendered(client, body: dict) -> list:
    """llama-server's prompt for `body`: /apply-template's text, tokenized as a prompt."""
    text = orjson.loads(await (await client.post("/apply-template", data=orjson.dumps(body))).read())["prompt"]
    return orjson.loads(await (await client.post("/tokenize", data=orjson.dumps({"content": text}))).read())["tokens"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_the_web_uis_continue_is_the_rest_of_the_answer(stack, stream):
    client, fake = stack
    body = {"messages": MESSAGES, **WEBUI, "stream": stream}
    ids = await prompt_of(client, fake, body)
    assert ids == await rendered(client, {"messages": MESSAGES})
    # The prefill is the prompt's end: no end of turn after it, no new assistant turn.
    assert fake.tokenizer.decode(ids, skip_special_tokens=False).endswith("Once upon a")


async def test_an_openai_clients_final_assistant_message_is_closed(stack):
    client, fake = stack
    ids = await prompt_of(client, fake, {"messages": MESSAGES, "max_tokens": 4})
    assert ids != await rendered(client, {"messages": MESSAGES})
    assert not fake.tokenizer.decode(ids, skip_special_tokens=False).endswith("Once upon a")


async def test_generation_flags_sent_are_read_as_sent(stack):
    client, fake = stack
    body = {"messages": MESSAGES, **WEBUI, "add_generation_prompt": True}
    closed = await prompt_of(client, fake, body)
    assert closed == await prompt_of(client, fake, {"messages": MESSAGES, "max_tokens": 4})


TWO = MESSAGES + [{"role": "Assistant", "content": " time"}]


async def test_two_final_assistant_messages_are_llama_servers_400(stack):
    """llama-server prefills only one final assistant message: a second before it is its 400 'Cannot have 2 or more
    assistant messages at the end of the list.' (oaicompat_chat_params_parse; its test_chat_completion.py lists the
    case as invalid), on /apply-template and a llama.cpp client's /v1 chat; here both rendered the first as a closed
    turn. Any other client's /v1 chat keeps vLLM's reading (both rendered)."""
    client, fake = stack
    before = len(fake.script.requests)
    for path, body in [("/apply-template", {"messages": TWO}), ("/v1/chat/completions", {"messages": TWO, **WEBUI}),
                       ("/v1/chat/completions/input_tokens", {"messages": TWO, **WEBUI})]:
        response = await client.post(path, data=orjson.dumps(body))
        error = orjson.loads(await response.read())["error"]
        assert (response.status, error["message"]) == (400, "Cannot have 2 or more assistant messages at the end of "
                                                             "the list."), path
        assert error["param"] == "messages"
    assert len(fake.script.requests) == before
    assert (await prompt_of(client, fake, {"messages": TWO, "max_tokens": 4}))[-1] is not None
