"""vLLM's derender routes (fake scheduler), POST /v1/chat/completions/derender and /v1/completions/derender, as
vllm/entrypoints/serve/disagg/protocol.py defines them: an /inference/v1/generate answer's token ids turned into the
chat.completion / text_completion the request would have got (reasoning split, tool calls, stop strings, echo). Both
were a 404, so vLLM's scale-out flow (render, generate, derender) stopped at its last step."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from tests.unit.test_vllm_render import loop_gap_while

CHAT = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "enable_thinking": False,
        "max_tokens": 4, "temperature": 0}
TOOLS = [{"type": "function", "function": {"name": "get", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]


async def post(client, path, body) -> tuple[int, object]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


def same(a: dict, b: dict) -> bool:
    drop = ("id", "created", "timings")
    return {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


async def test_render_generate_derender_is_the_chat_routes_answer(stack):
    client, _ = stack
    status, rendered = await post(client, "/v1/chat/completions/render", CHAT)
    status, generated = await post(client, "/inference/v1/generate", rendered)
    status, body = await post(client, "/v1/chat/completions/derender", {
        "model": "default", "generate_response": generated, "prompt_tokens": len(rendered["token_ids"]),
        "chat_request": CHAT})
    assert status == 200, body
    status, chat = await post(client, "/v1/chat/completions", CHAT)
    assert same(body, chat), (body, chat)
    assert body["choices"][0]["message"]["content"] and body["usage"]["prompt_tokens"] == len(rendered["token_ids"])


async def test_a_tool_call_in_the_ids_is_parsed_with_the_requests_tools(stack):
    client, fake = stack
    text = "<tool_call>\n<function=get>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
    ids = fake.tokenizer.encode(text).ids + [fake.eos_id]
    status, body = await post(client, "/v1/chat/completions/derender", {
        "model": "default", "chat_request": {**CHAT, "tools": TOOLS},
        "generate_response": {"request_id": "g1", "choices": [{"index": 0, "token_ids": ids,
                                                               "finish_reason": "stop"}]}})
    assert status == 200, body
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and not choice["message"]["content"]
    call = choice["message"]["tool_calls"][0]["function"]
    assert (call["name"], orjson.loads(call["arguments"])) == ("get", {"city": "Paris"})
    assert body["usage"]["completion_tokens"] == len(ids) and not fake.script.requests


async def test_completions_derender_numbers_the_choices_across_prompts_with_echo(stack):
    client, fake = stack
    request = {"model": "default", "prompt": ["ab", "c"], "max_tokens": 3, "echo": True, "temperature": 0}
    status, rendered = await post(client, "/v1/completions/render", request)
    generated = [(await post(client, "/inference/v1/generate", r))[1] for r in rendered]
    status, body = await post(client, "/v1/completions/derender", {
        "model": "default", "generate_responses": generated, "completion_request": request,
        "prompt_tokens": [len(r["token_ids"]) for r in rendered]})
    assert status == 200, body
    status, whole = await post(client, "/v1/completions", request)
    assert same(body, whole), (body, whole)
    assert [c["index"] for c in body["choices"]] == [0, 1] and body["choices"][1]["text"].startswith("c")


@pytest.mark.parametrize("path,body,param", [
    ("/v1/chat/completions/derender", {"model": "default", "stream": True, "generate_chunk": {}}, "stream"),
    ("/v1/chat/completions/derender", {"model": "default"}, "generate_response"),
    ("/v1/completions/derender", {"model": "default", "generate_responses": [{"choices": []}],
                                  "prompt_tokens": [1, 2]}, "prompt_tokens"),
    ("/v1/chat/completions/derender", {"model": "nope", "generate_response": {"choices": []}}, "model"),
], ids=["stream", "no-response", "prompt-tokens-length", "unknown-model"])
async def test_a_bad_derender_body_names_the_field(stack, path, body, param):
    client, _ = stack
    status, got = await post(client, path, body)
    assert status in (400, 404) and got["error"]["param"] == param, got


@pytest.mark.parametrize("path,bad", [
    ("/v1/chat/completions/derender", -1), ("/v1/chat/completions/derender", 2 ** 40),
    ("/v1/completions/derender", -3), ("/v1/completions/derender", 10 ** 6)])
async def test_an_id_outside_the_vocabulary_is_a_400(stack, path, bad):
    """A negative id, or one past the wire's int32, was a 500 (OverflowError, ValueError); one past the vocabulary
    decoded to nothing. Each is the 400 /inference/v1/generate gives a prompt id outside the vocabulary."""
    client, fake = stack
    generated = {"choices": [{"index": 0, "token_ids": [5, bad], "finish_reason": "length"}]}
    body = ({"model": "default", "generate_response": generated, "chat_request": CHAT} if "chat" in path else
            {"model": "default", "generate_responses": [generated], "completion_request": {"prompt": "hi"}})
    status, got = await post(client, path, body)
    vocab = fake.tokenizer.get_vocab_size(with_added_tokens=True)
    assert status == 400, got
    assert got["error"] == {"message": f"token id {bad} is outside the vocabulary [0, {vocab})",
                            "type": "invalid_request_error", "param": "token_ids", "code": "invalid_value"}


def _derender_body(path: str, choices: list) -> dict:
    generated = {"choices": choices}
    return ({"model": "default", "generate_response": generated} if "chat" in path else
            {"model": "default", "generate_responses": [generated]})


@pytest.mark.parametrize("path", ["/v1/chat/completions/derender", "/v1/completions/derender"])
async def test_more_ids_than_the_context_holds_are_refused_before_they_are_read(stack, path):
    """No generate answer holds more ids than the context: 2M of them (7.6 MB, under the body limit) held the event
    loop ~50 s (the schema walk and the detokenizer on it) and froze every other request; now a 400 naming token_ids."""
    client, _ = stack
    status, got = await post(client, path, _derender_body(path, [{"token_ids": [5] * 2049, "finish_reason": "length"}]))
    assert status == 400, got
    assert got["error"]["param"] == "token_ids"
    assert "holds 2049 ids, more than the model's context of 2048 tokens" in got["error"]["message"]


async def test_a_large_derender_leaves_the_event_loop_to_other_requests(stack):
    """The ids are read on the CPU pool, as the routes' prompts are parsed: a loop that held them all blocked every
    other client for the whole derender."""
    client, fake = stack
    ids = (fake.tokenizer.encode("hello world " * 400).ids * 3)[:2048]
    body = _derender_body("/v1/completions/derender", [{"token_ids": ids, "finish_reason": "length"}] * 64)
    gap, took, (status, got) = await loop_gap_while(lambda: post(client, "/v1/completions/derender", body))
    assert status == 200 and len(got["choices"]) == 64 and got["choices"][63]["text"].startswith("hello world")
    assert gap < took / 3, (gap, took)


async def test_a_chat_requests_own_template_is_gated_as_on_the_chat_route():
    """chat_request is rendered for its prompt: its chat_template ran here whatever SPARKINFER_TRUST_REQUEST_CHAT_TEMPLATE
    said (a range past the sandbox's bound was a 500; nested ones hold a thread for hours, vLLM's GHSA-6fvq-23cw-5628),
    where /v1/chat/completions and its render route refuse it. Now the same 400, and a trusting server renders it."""
    template = "{% for m in messages %}{{ m.content }}{% endfor %}<|im_start|>assistant\n"
    chat = {"messages": [{"role": "user", "content": "hi"}], "chat_template": template}
    body = {"model": "default", "generate_response": {"choices": [{"token_ids": [5, 6]}]}, "chat_request": chat}
    for trusted in (False, True):
        fake = FakeServing(build_tokenizer())
        async with fake_gateway(fake, trust_request_chat_template=trusted) as (client, _):
            status, got = await post(client, "/v1/chat/completions/derender", body)
        if trusted:
            assert status == 200 and got["choices"][0]["message"]["content"] == fake.tokenizer.decode([5, 6]), got
        else:
            assert status == 400 and got["error"]["param"] == "chat_template", got
            assert "SPARKINFER_TRUST_REQUEST_CHAT_TEMPLATE" in got["error"]["message"]


@pytest.mark.parametrize("counts", [(3, 1), (0, 2)], ids=["more-than-n", "fewer-than-n"])
async def test_a_response_with_other_than_n_choices_is_a_400_with_echo(stack, counts):
    """Each choice's echo is its prompt's, read at index // n: a response of 3 choices for n 1 was a 500 (IndexError)
    and a response of none gave the first prompt's echo to the second prompt's choice."""
    client, fake = stack
    request = {"model": "default", "prompt": ["ab", "c"], "max_tokens": 3, "echo": True, "temperature": 0}
    status, rendered = await post(client, "/v1/completions/render", request)
    generated = [(await post(client, "/inference/v1/generate", r))[1] for r in rendered]
    for response, count in zip(generated, counts):
        response["choices"] = [dict(response["choices"][0], index=i) for i in range(count)]
    status, body = await post(client, "/v1/completions/derender", {
        "model": "default", "generate_responses": generated, "completion_request": request,
        "prompt_tokens": [len(r["token_ids"]) for r in rendered]})
    wrong = 0 if counts[0] != 1 else 1
    assert status == 400, body
    assert body["error"]["param"] == f"generate_responses[{wrong}].choices", body
    assert body["error"]["message"].startswith(f"generate_responses[{wrong}] has {counts[wrong]} choices"), body


async def test_more_responses_than_prompts_is_a_400_with_return_token_ids(stack):
    """prompt_token_ids are read per prompt: two responses for one prompt's return_token_ids were a 500 (IndexError)."""
    client, fake = stack
    response = {"choices": [{"index": 0, "token_ids": [5], "finish_reason": "length"}]}
    status, body = await post(client, "/v1/completions/derender", {
        "model": "default", "generate_responses": [response, response],
        "completion_request": {"model": "default", "prompt": "hi", "return_token_ids": True}})
    assert status == 400 and body["error"]["param"] == "generate_responses", body
    assert body["error"]["message"] == "generate_responses has 2 responses; completion_request has 1 prompts", body
