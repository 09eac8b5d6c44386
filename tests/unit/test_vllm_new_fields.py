"""vLLM's newer /v1 request fields (its ChatCompletionRequest / CompletionRequest extra params), fake scheduler:
truncation_side "right" keeps a truncated prompt's first tokens; logprob_token_ids and
watermarking ask for what is not served and are a 400 naming them; stream_interval and session_id change nothing
the client sees. All were dropped as unknown fields: truncation_side "right" got the prompt's last tokens."""
import orjson
import pytest

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
BASE = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "enable_thinking": False,
        "max_tokens": 8}
IDS = list(range(10, 30))


async def post(client, body, path=CHAT):
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("side,kept", [(None, IDS[-5:]), ("left", IDS[-5:]), ("right", IDS[:5])],
                         ids=["default", "left", "right"])
async def test_truncation_side_picks_the_tokens_kept(stack, side, kept):
    client, fake = stack
    body = {"model": "default", "prompt": IDS, "max_tokens": 4, "truncate_prompt_tokens": 5}
    if side is not None:
        body["truncation_side"] = side
    status, answer = await post(client, body, COMPLETIONS)
    assert status == 200, answer
    assert list(fake.script.requests[-1].prompt_token_ids) == kept
    assert answer["usage"]["prompt_tokens"] == 5


async def test_truncation_side_right_on_chat(stack):
    client, fake = stack
    status, answer = await post(client, {**BASE, "truncate_prompt_tokens": 3, "truncation_side": "right"})
    assert status == 200, answer
    whole = fake.tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n").ids
    assert list(fake.script.requests[-1].prompt_token_ids) == whole[:3]


async def test_an_unknown_truncation_side_is_a_400(stack):
    client, _ = stack
    status, body = await post(client, {**BASE, "truncate_prompt_tokens": 3, "truncation_side": "middle"})
    assert status == 400 and body["error"]["param"] == "truncation_side", body


REFUSED = [("logprob_token_ids", [5, 6]), ("watermarking", True)]


@pytest.mark.parametrize("path,base", [(CHAT, BASE), (COMPLETIONS, {"model": "default", "prompt": "hi"})],
                         ids=["chat", "completions"])
@pytest.mark.parametrize("name,value", REFUSED, ids=[r[0] for r in REFUSED])
async def test_unserved_fields_are_refused_by_name(stack, path, base, name, value):
    client, fake = stack
    status, body = await post(client, {**base, "logprobs": True if path == CHAT else 1, name: value}, path)
    assert status == 400 and body["error"]["code"] == "unsupported" and body["error"]["param"] == name, body
    assert not fake.script.requests


async def test_fields_without_effect_are_served_as_without_them(stack, caplog):
    client, _ = stack
    extra = {"stream_interval": 4, "session_id": "s-1", "watermarking": False, "logprob_token_ids": None,
             "repetition_detection": None, "mm_processor_kwargs": {}}
    status, body = await post(client, {**BASE, **extra})
    assert status == 200 and body["choices"][0]["message"]["content"] == "Hello world", body
    assert "unknown request field" not in caplog.text


# vLLM's stop on a repeated token pattern itself: tests/unit/test_repetition_stop_api.py.


async def test_a_repetition_field_of_the_wrong_type_is_a_400_naming_it(stack):
    client, _ = stack
    status, body = await post(client, {**BASE, "repetition_min_count": "x"})
    assert status == 400 and body["error"]["param"] == "repetition_min_count", body
