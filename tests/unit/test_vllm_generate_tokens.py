"""vLLM's tokens-in / tokens-out POST /inference/v1/generate (fake scheduler), as vllm/entrypoints/serve/disagg answers
it (GenerateRequest: token_ids + vLLM SamplingParams; GenerateResponse: each choice's token_ids, chat-shaped logprobs
named token_id:N; streamed chunks of new ids, a usage chunk with include_usage, [DONE]). It was a 404, so RL rollout
clients that post token ids there (prime-rl, SkyRL, vime) could not run against this server."""
import orjson
import pytest

REPLY = "1, 2, 3, 4, 5"
PATH = "/inference/v1/generate"


async def post(client, body) -> tuple[int, object]:
    response = await client.post(PATH, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def test_token_ids_in_token_ids_out(stack):
    client, fake = stack
    status, body = await post(client, {"request_id": "r1", "token_ids": [5, 6, 7],
                                       "sampling_params": {"max_tokens": 3, "temperature": 0}})
    assert status == 200, body
    request = fake.script.requests[0]
    assert list(request.prompt_token_ids) == [5, 6, 7] and request.max_tokens == 3
    assert body["request_id"] == "generate-tokens-r1"
    assert body["choices"] == [{"index": 0, "logprobs": None, "finish_reason": "length",
                                "token_ids": fake.tokenizer.encode(REPLY).ids[:3], "routed_experts": None}]
    assert (body["prompt_logprobs"], body["kv_transfer_params"]) == (None, None)
    # As vLLM's serve_tokens_full_generator answers since GenerateResponse has them.
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    assert body["model"] == "fake-model" and isinstance(body["created"], int)


async def test_without_max_tokens_it_runs_to_the_end(stack):
    client, fake = stack
    status, body = await post(client, {"token_ids": [5, 6], "sampling_params": {}})
    assert fake.script.requests[0].max_tokens > 16          # not SamplingParams' own default of 16
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["token_ids"][-1] == fake.eos_id


async def test_logprobs_name_tokens_by_id(stack):
    client, fake = stack
    fake.script.top_ids = [9, 8]
    status, body = await post(client, {"token_ids": [5, 6, 7], "sampling_params": {
        "max_tokens": 1, "logprobs": 2, "prompt_logprobs": 1}})
    token_id = body["choices"][0]["token_ids"][0]
    entry = body["choices"][0]["logprobs"]["content"][0]
    assert (entry["token"], entry["logprob"], entry["bytes"]) == (f"token_id:{token_id}", -0.5, None)
    assert [t["token"] for t in entry["top_logprobs"]] == ["token_id:9", "token_id:8"]
    assert body["prompt_logprobs"][0] is None and "6" in body["prompt_logprobs"][1]
    status, body = await post(client, {"token_ids": [5], "sampling_params": {"max_tokens": 1, "logprobs": 0}})
    entry = body["choices"][0]["logprobs"]["content"][0]
    assert [t["token"] for t in entry["top_logprobs"]] == [entry["token"]]     # max(logprobs, 1): the sampled one


async def test_the_stream_sends_new_ids_then_usage_then_done(stack):
    client, fake = stack
    response = await client.post(PATH, data=orjson.dumps({
        "request_id": "s", "token_ids": [5, 6], "stream": True, "stream_options": {"include_usage": True},
        "sampling_params": {"max_tokens": 3}}))
    lines = [line[6:] for line in (await response.read()).decode().splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [orjson.loads(line) for line in lines[:-1]]
    pieces, usage = chunks[:-1], chunks[-1]
    assert [c["choices"][0]["token_ids"] for c in pieces] == [[i] for i in fake.tokenizer.encode(REPLY).ids[:3]]
    assert [c["choices"][0]["finish_reason"] for c in pieces] == [None, None, "length"]
    assert {c["request_id"] for c in chunks} == {"generate-tokens-s"} and pieces[0]["usage"] is None
    assert usage == {"request_id": "generate-tokens-s", "choices": [],
                     "usage": {"prompt_tokens": 2, "total_tokens": 5, "completion_tokens": 3}}


@pytest.mark.parametrize("body,param", [
    ({"sampling_params": {}}, "token_ids"),
    ({"token_ids": [1, -2], "sampling_params": {}}, "token_ids"),
    ({"token_ids": [1]}, "sampling_params"),
    ({"token_ids": [1], "sampling_params": {"max_new_tokens": 2}}, "sampling_params.max_new_tokens"),
], ids=["no-ids", "negative-id", "no-params", "unknown-param"])
async def test_a_bad_body_is_a_400_naming_the_field(stack, body, param):
    client, fake = stack
    status, got = await post(client, body)
    assert (status, got["error"]["param"]) == (400, param), got
    assert not fake.script.requests


@pytest.mark.parametrize("max_tokens", [0, -1, "0"])
async def test_max_tokens_below_one_is_refused_without_the_echo_advice(stack, max_tokens):
    """GenerateRequest has no echo (an echo sampling parameter is refused as unknown), so the 400 says what vLLM's
    SamplingParams says, not /v1/completions' "(0 only with echo: true)"."""
    client, fake = stack
    status, got = await post(client, {"token_ids": [5, 6], "sampling_params": {"max_tokens": max_tokens}})
    assert status == 400 and got["error"]["param"] == "sampling_params.max_tokens", got
    assert got["error"]["message"] == f"max_tokens must be at least 1, got {int(max_tokens)}"
    assert not fake.script.requests


async def test_a_whole_serialized_sampling_params_is_taken(stack):
    client, fake = stack
    # vllm.SamplingParams(max_tokens=2) as msgspec.to_builtins writes it: every field, defaults and nulls included.
    params = {"n": 1, "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0, "temperature": 1.0,
              "top_p": 1.0, "top_k": 0, "min_p": 0.0, "seed": None, "stop": [], "stop_token_ids": [],
              "ignore_eos": False, "max_tokens": 2, "min_tokens": 0, "logprobs": None, "prompt_logprobs": None,
              "detokenize": True, "skip_special_tokens": True, "spaces_between_special_tokens": True,
              "logits_processors": None, "include_stop_str_in_output": False, "truncate_prompt_tokens": None,
              "output_kind": 0, "structured_outputs": None, "logit_bias": None, "allowed_token_ids": None,
              "extra_args": None, "bad_words": None, "skip_reading_prefix_cache": None, "flat_logprobs": False}
    status, body = await post(client, {"token_ids": [5, 6], "sampling_params": params})
    assert status == 200, body
    assert len(body["choices"][0]["token_ids"]) == 2 and fake.script.requests[0].max_tokens == 2


async def test_whole_float_ids_are_those_ids(stack):
    """Ids sent as whole floats ([5.0, 6.0], as a float tensor's .tolist() gives them) are the ids, as pydantic's lax
    mode reads GenerateRequest's list[int] (and /v1/completions its token-id prompt); 1.5 and true stay the 400."""
    client, fake = stack
    status, body = await post(client, {"token_ids": [5.0, 6.0, 7], "sampling_params": {"max_tokens": 2.0}})
    assert status == 200, body
    request = fake.script.requests[0]
    assert list(request.prompt_token_ids) == [5, 6, 7] and request.max_tokens == 2
    assert body["choices"][0]["token_ids"] == fake.tokenizer.encode(REPLY).ids[:2]
    for ids in ([5.5, 6], [True, 6]):
        status, got = await post(client, {"token_ids": ids, "sampling_params": {}})
        assert (status, got["error"]["param"]) == (400, "token_ids"), got
    assert len(fake.script.requests) == 1
