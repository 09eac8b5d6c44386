"""Message roles in any case on the /v1 chat routes (fake scheduler), as SGLang's chat request lowercases them
(ChatCompletionMessageGenericParam._normalize_role) and Ollama's /api/chat reads them: "User" or "ASSISTANT" were a 400
naming the role enum. A role that is none of them in any case stays the 400."""
import orjson
import pytest

from gateway.fake_scheduler import build_tokenizer

TOKENIZER = build_tokenizer()
MESSAGES = [{"role": "System", "content": "Be brief."}, {"role": "USER", "content": "hi"},
            {"role": "Assistant", "content": "hello"}, {"role": "User", "content": "again"}]
LOWER = [{**message, "role": message["role"].lower()} for message in MESSAGES]


async def post(client, path: str, body: dict) -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps({"model": "default", **body}))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions"])
async def test_roles_in_any_case_render_as_lowercase_ones(stack, path):
    client, fake = stack
    status, body = await post(client, path, {"messages": LOWER})
    assert status == 200, body
    expected = list(fake.script.requests[-1].prompt_token_ids)
    status, body = await post(client, path, {"messages": MESSAGES})
    assert status == 200, body
    assert list(fake.script.requests[-1].prompt_token_ids) == expected
    assert "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi" in TOKENIZER.decode(expected,
                                                                                               skip_special_tokens=False)


async def test_tokenize_reads_them_too(stack):
    client, _ = stack
    status, lower = await post(client, "/tokenize", {"messages": LOWER})
    status_cased, cased = await post(client, "/tokenize", {"messages": MESSAGES})
    assert (status, status_cased) == (200, 200) and cased["tokens"] == lower["tokens"]


async def test_an_unknown_role_is_still_a_400(stack):
    client, _ = stack
    status, body = await post(client, "/v1/chat/completions", {"messages": [{"role": "Wizard", "content": "hi"}]})
    assert status == 400 and body["error"]["param"] == "messages[0].role", body
