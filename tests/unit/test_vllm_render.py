"""vLLM's render routes (fake scheduler), POST /v1/chat/completions/render and /v1/completions/render, as
vllm/entrypoints/serve/render/serving.py answers them: the request rendered and tokenized, nothing generated, as the
GenerateRequest that /inference/v1/generate takes (one for a chat, a list of one per prompt for completions). Both
were a 404, so RL rollout clients and routers that render before posting token ids could not run against this server."""
import asyncio
import gc
import time

import orjson
import pytest

REPLY = "1, 2, 3, 4, 5"
CHAT = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "enable_thinking": False,
        "max_tokens": 3, "temperature": 0}


async def loop_gap_while(request) -> tuple[float, float, object]:
    """(the event loop's longest gap between 10 ms ticks while `request()` runs, the seconds it ran, its result)."""
    gaps, done = [], asyncio.Event()

    async def tick():
        while not done.is_set():
            start = time.monotonic()
            await asyncio.sleep(0.01)
            gaps.append(time.monotonic() - start)
    # A full collection of what earlier tests left (a suite run) would stall the loop too: not what is measured.
    gc.collect()
    gc.disable()
    try:
        ticker = asyncio.create_task(tick())
        started = time.monotonic()
        result = await request()
        took, _ = time.monotonic() - started, done.set()
        await ticker
    finally:
        gc.enable()
    return max(gaps), took, result


async def post(client, path, body) -> tuple[int, object]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def test_a_chat_renders_to_its_prompt_ids_and_sampling_params_without_generating(stack):
    client, fake = stack
    status, body = await post(client, "/v1/chat/completions/render", {**CHAT, "stop": ["x"], "seed": 7,
                                                                        "cache_salt": "s", "priority": 2})
    assert status == 200, body
    assert not fake.script.requests
    # The ids the chat route sends the scheduler for the same request.
    status, _ = await post(client, "/v1/chat/completions", CHAT)
    assert body["token_ids"] == list(fake.script.requests[0].prompt_token_ids)
    assert body["request_id"].startswith("chatcmpl-") and body["features"] is None
    assert (body["model"], body["stream"], body["stream_options"], body["cache_salt"], body["priority"],
            body["kv_transfer_params"]) == ("default", False, None, "s", 2, None)
    params = body["sampling_params"]
    assert (params["max_tokens"], params["temperature"], params["seed"], params["stop"], params["n"],
            params["output_kind"]) == (3, 0.0, 7, ["x"], 1, 2)


async def test_the_rendered_request_generates_what_the_chat_would(stack):
    client, fake = stack
    status, rendered = await post(client, "/v1/chat/completions/render", {**CHAT, "logprobs": True, "top_logprobs": 2})
    assert rendered["sampling_params"]["logprobs"] == 2
    status, body = await post(client, "/inference/v1/generate", rendered)
    assert status == 200, body
    request = fake.script.requests[0]
    assert list(request.prompt_token_ids) == rendered["token_ids"] and request.max_tokens == 3
    assert body["choices"][0]["token_ids"] == fake.tokenizer.encode(REPLY).ids[:3]


async def test_completions_render_one_request_per_prompt(stack):
    client, fake = stack
    status, body = await post(client, "/v1/completions/render", {"model": "default", "prompt": [[5, 6], [7]],
                                                                  "max_tokens": 2, "stream": True,
                                                                  "stream_options": {"include_usage": True}})
    assert status == 200 and isinstance(body, list), body
    assert [item["token_ids"] for item in body] == [[5, 6], [7]] and not fake.script.requests
    assert all(item["request_id"].startswith("cmpl-") for item in body)
    assert [item["sampling_params"]["max_tokens"] for item in body] == [2, 2]
    assert body[0]["stream_options"] == {"include_usage": True} and body[0]["sampling_params"]["output_kind"] == 1


@pytest.mark.parametrize("extra,expected", [
    ({"response_format": {"type": "json_object"}}, {"json_object": True}),
    ({"guided_regex": "[ab]+"}, {"regex": "[ab]+"}),
    ({"structured_outputs": {"choice": ["yes", "no"]}}, {"choice": ["yes", "no"]}),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer"}}}},
     {"json": {"type": "integer"}}),
    # llama.cpp's form, the schema beside the type, as the chat route reads it.
    ({"response_format": {"type": "json_object", "schema": {"type": "integer"}}}, {"json": {"type": "integer"}}),
], ids=["json_object", "guided_regex", "structured_outputs", "json_schema", "schema-beside-type"])
async def test_the_output_constraint_is_carried_as_structured_outputs(stack, extra, expected):
    client, _ = stack
    status, body = await post(client, "/v1/chat/completions/render", {**CHAT, **extra})
    assert status == 200 and body["sampling_params"]["structured_outputs"] == expected, body


async def test_errors_are_the_generation_routes_and_a_forced_tool_call_is_refused(stack):
    client, fake = stack
    status, body = await post(client, "/v1/completions/render", {"model": "default", "prompt": ""})
    assert status == 400 and body["error"]["param"] == "prompt", body
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    status, body = await post(client, "/v1/chat/completions/render", {**CHAT, "tools": tools,
                                                                        "tool_choice": "required"})
    assert status == 400 and body["error"]["param"] == "tool_choice", body
    assert not fake.script.requests


async def test_return_token_offsets_gives_each_tokens_characters_in_the_rendered_text(stack):
    # vLLM's renderer asks the fast tokenizer for return_offsets_mapping; token_offsets is null otherwise.
    client, fake = stack
    status, body = await post(client, "/v1/completions/render", {"model": "default", "prompt": ["hello world", "ab"],
                                                                  "return_token_offsets": True})
    assert status == 200, body
    pieces = ["hello world"[start:end] for start, end in body[0]["token_offsets"]]
    assert "".join(pieces) == "hello world" and len(pieces) == len(body[0]["token_ids"])
    assert len(body[1]["token_offsets"]) == len(body[1]["token_ids"])
    status, body = await post(client, "/v1/completions/render", {"model": "default", "prompt": [5, 6],
                                                                  "return_token_offsets": True})
    assert body[0]["token_offsets"] is None
    status, body = await post(client, "/v1/chat/completions/render", {**CHAT, "return_token_offsets": True})
    assert len(body["token_offsets"]) == len(body["token_ids"]) and body["token_offsets"][0][0] == 0
    status, body = await post(client, "/v1/chat/completions/render", CHAT)
    assert body["token_offsets"] is None


async def test_many_prompts_offsets_leave_the_event_loop_to_other_requests(stack):
    """Each prompt's offsets are found on the CPU pool, as its ids are: 512 prompts of 3500 tokens held the event loop
    ~9 s, every other client of the gateway standing still."""
    client, fake = stack
    text = "hello world " * 300
    body = {"model": "default", "prompt": [text] * 256, "max_tokens": 1, "return_token_offsets": True}
    # A first render warms the route (its schema, the CPU pool's threads), which would stall the loop once anyway.
    assert (await post(client, "/v1/completions/render", {**body, "prompt": text}))[0] == 200
    # Timed to the answer's head: reading its 6 MB body here is the test client's work on the same loop.
    gap, took, response = await loop_gap_while(lambda: client.post("/v1/completions/render", data=orjson.dumps(body)))
    got = orjson.loads(await response.read())
    assert response.status == 200 and len(got) == 256
    assert got[255]["token_offsets"] == [list(pair) for pair in fake.tokenizer.encode(text).offsets]
    assert gap < took / 3, (gap, took)


async def test_a_large_schema_leaves_the_event_loop_to_other_requests(stack):
    """The rendered sampling_params read response_format again (its schema checked against JSON Schema's metaschema)
    on the event loop: a 6000-property schema held it 1.6 s on a real stack, every other client standing still."""
    client, fake = stack
    names = [f"p{i}" for i in range(6000)]
    schema = {"type": "object", "properties": {name: {"type": "string"} for name in names}, "required": names}
    body = {**CHAT, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
    assert (await post(client, "/v1/chat/completions/render", {**CHAT, "response_format": {"type": "json_object"}}))[0] \
        == 200
    gap, took, response = await loop_gap_while(
        lambda: client.post("/v1/chat/completions/render", data=orjson.dumps(body)))
    got = orjson.loads(await response.read())
    assert response.status == 200, got
    assert got["sampling_params"]["structured_outputs"] == {"json": schema}
    assert gap < took / 3, (gap, took)
