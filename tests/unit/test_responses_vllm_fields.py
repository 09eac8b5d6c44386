"""vLLM's Responses extensions that reach the chat template or the output (fake scheduler): chat_template_kwargs
(enable_thinking, preserve_thinking, ...), structured_outputs and skip_special_tokens, as vLLM's ResponsesRequest
takes them (vllm/entrypoints/openai/responses/protocol.py). They were logged as unknown fields and dropped: a request
with chat_template_kwargs {"enable_thinking": false} still thought."""
import orjson
import pytest

from gateway.fake_scheduler import build_tokenizer

TOKENIZER = build_tokenizer()
THOUGHT = {"type": "reasoning", "id": "rs_1", "summary": [],
           "content": [{"type": "reasoning_text", "text": "I pick MANGO"}]}
HISTORY = [{"role": "user", "content": "Choose a fruit."}, THOUGHT,
           {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
           {"role": "user", "content": "Which one?"}]


async def post(client, path: str, body: dict) -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps({"model": "fake-model", **body}))
    return response.status, orjson.loads(await response.read())


def prompt_of(fake) -> str:
    return TOKENIZER.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_chat_template_kwargs_switch_thinking_off(stack, stream):
    client, fake = stack
    fake.script.reply = "Hello world"
    response = await client.post("/v1/responses", data=orjson.dumps(
        {"model": "fake-model", "input": "hi", "stream": stream,
         "chat_template_kwargs": {"enable_thinking": False}}))
    raw = await response.read()
    assert response.status == 200, raw
    assert prompt_of(fake).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    if stream:
        frames = [orjson.loads(f.split("data: ", 1)[1]) for f in raw.decode().split("\n\n") if f.strip()]
        output = frames[-1]["response"]["output"]
    else:
        output = orjson.loads(raw)["output"]
    assert [item["type"] for item in output] == ["message"]
    assert output[0]["content"][0]["text"] == "Hello world"


async def test_an_explicit_enable_thinking_wins_over_the_effort(stack):
    """As vLLM's build_chat_params: reasoning.effort sets enable_thinking only when chat_template_kwargs lacks it."""
    client, fake = stack
    status, body = await post(client, "/v1/responses", {"input": "hi", "reasoning": {"effort": "none"},
                                                        "chat_template_kwargs": {"enable_thinking": True}})
    assert status == 200, body
    assert prompt_of(fake).endswith("<|im_start|>assistant\n<think>\n")


async def test_preserve_thinking_replays_earlier_reasoning(stack):
    client, fake = stack
    await post(client, "/v1/responses", {"input": HISTORY})
    assert "MANGO" not in prompt_of(fake)
    status, created = await post(client, "/v1/responses",
                                 {"input": HISTORY, "chat_template_kwargs": {"preserve_thinking": True}})
    assert status == 200, created
    assert "<think>\nI pick MANGO\n</think>\n\nok" in prompt_of(fake)
    status, counted = await post(client, "/v1/responses/input_tokens",
                                 {"input": HISTORY, "chat_template_kwargs": {"preserve_thinking": True}})
    assert status == 200 and counted["input_tokens"] == created["usage"]["input_tokens"], counted


async def test_a_reserved_template_variable_is_a_400(stack):
    client, _ = stack
    status, body = await post(client, "/v1/responses", {"input": "hi", "chat_template_kwargs": {"tools": []}})
    assert status == 400 and body["error"]["param"].startswith("chat_template_kwargs"), body


async def test_structured_outputs_constrain_the_answer(stack):
    client, fake = stack
    status, body = await post(client, "/v1/responses", {"input": "hi", "structured_outputs": {"choice": ["yes", "no"]}})
    assert status == 200, body
    grammar = fake.script.requests[-1].constraint.grammar
    assert '"yes"' in grammar and '"no"' in grammar
    status, body = await post(client, "/v1/responses", {"input": "hi", "structured_outputs": {"choice": ["yes"]},
                                                        "text": {"format": {"type": "json_object"}}})
    assert status == 400 and body["error"]["param"] in ("structured_outputs", "text.format"), body


async def test_skip_special_tokens_false_keeps_them(stack):
    client, fake = stack
    fake.script.reply = "Hello<|im_start|> world"
    status, body = await post(client, "/v1/responses", {"input": "hi", "reasoning": {"effort": "none"},
                                                        "skip_special_tokens": False})
    assert status == 200 and body["output"][-1]["content"][0]["text"] == "Hello<|im_start|> world", body
    status, body = await post(client, "/v1/responses", {"input": "hi", "reasoning": {"effort": "none"}})
    assert status == 200 and body["output"][-1]["content"][0]["text"] == "Hello world", body


@pytest.mark.parametrize("tier", ["bogus", "", "standard_only"])
async def test_a_service_tier_outside_vllms_literal_is_its_400(stack, tier):
    """vLLM's ResponsesRequest types service_tier Literal["auto", "default", "flex", "scale", "priority"] (OpenAI's
    tiers); another value was taken and ignored (200)."""
    client, _ = stack
    status, body = await post(client, "/v1/responses", {"input": "hi", "service_tier": tier})
    assert status == 400, body
    assert body["error"]["param"] == "service_tier" and body["error"]["type"] == "invalid_request_error"
    assert "auto" in body["error"]["message"] and "priority" in body["error"]["message"]


@pytest.mark.parametrize("tier", ["auto", "default", "flex", "scale", "priority", None])
async def test_vllms_service_tiers_are_served(stack, tier):
    client, _ = stack
    status, body = await post(client, "/v1/responses", {"input": "hi", "service_tier": tier})
    assert status == 200, body


async def test_request_id_names_the_response(stack):
    # vLLM's ResponsesRequest.request_id is the response's id as given (vllm-project/vllm#25428: a client creates with
    # request_id "hello", then reads and cancels "hello"). Before, it was dropped as an unknown field: the response
    # was resp_<random> and GET /v1/responses/hello a 404.
    client, fake = stack
    fake.script.reply = "Hello world"
    status, created = await post(client, "/v1/responses", {"input": "hi", "request_id": "hello"})
    assert (status, created["id"]) == (200, "hello")
    response = await client.get("/v1/responses/hello")
    assert response.status == 200 and (await response.json())["output"] == created["output"]
    status, later = await post(client, "/v1/responses", {"input": "and?", "previous_response_id": "hello"})
    assert status == 200 and later["id"].startswith("resp_") and later["previous_response_id"] == "hello"


async def test_request_id_of_a_held_response_is_refused(stack):
    # Taken again, it would replace the response a previous_response_id or GET reads.
    client, _ = stack
    assert (await post(client, "/v1/responses", {"input": "hi", "request_id": "twice"}))[0] == 200
    status, error = await post(client, "/v1/responses", {"input": "hi", "request_id": "twice"})
    assert status == 400 and error["error"]["param"] == "request_id"
    status, again = await post(client, "/v1/responses", {"input": "hi", "request_id": "twice", "store": False})
    assert (status, again["id"]) == (200, "twice")


@pytest.mark.parametrize("value", [5, ""], ids=["number", "empty"])
async def test_request_id_must_be_a_non_empty_string(stack, value):
    client, _ = stack
    status, error = await post(client, "/v1/responses", {"input": "hi", "request_id": value})
    assert status == 400 and error["error"]["param"] == "request_id"
