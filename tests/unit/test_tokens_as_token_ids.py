"""vLLM's return_tokens_as_token_ids on /v1 (fake scheduler): logprobs name each token "token_id:<id>" (chat's token
and bytes, legacy completions' tokens and top_logprobs keys, the echoed prompt's too), streamed or not; the text,
text_offset and vLLM's prompt_logprobs stay as they are."""
import orjson
import pytest

from gateway.fake_scheduler import build_tokenizer
from tests.unit.test_gateway_app import events

TOKENIZER = build_tokenizer()
# "日" is three byte tokens: by text each is U+FFFD, by id each is its own.
SUN = TOKENIZER.encode("日").ids
ALTERNATIVES = TOKENIZER.encode("本").ids + SUN[1:2]
CHAT = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "enable_thinking": False,
        "max_tokens": 8, "logprobs": True, "top_logprobs": 2, "return_tokens_as_token_ids": True}
COMPLETION = {"model": "default", "prompt": SUN, "max_tokens": 8, "logprobs": 2, "echo": True,
              "return_tokens_as_token_ids": True}


def name(token_id: int) -> str:
    return f"token_id:{token_id}"


async def answer(client, path: str, body: dict, stream: bool) -> list:
    """The choice (or, streamed, the choice of each chunk) of one request."""
    response = await client.post(path, data=orjson.dumps({**body, "stream": stream}))
    raw = await response.read()
    assert response.status == 200, raw
    if not stream:
        return [orjson.loads(raw)["choices"][0]]
    return [e["choices"][0] for e in events(raw) if e != "[DONE]" and e["choices"]]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_chat_logprobs_name_token_ids(stack, stream):
    client, fake = stack
    fake.script.token_ids, fake.script.top_ids = SUN, ALTERNATIVES
    choices = await answer(client, "/v1/chat/completions", CHAT, stream)
    entries = [e for c in choices if c.get("logprobs") for e in c["logprobs"]["content"]]
    assert [e["token"] for e in entries[:3]] == [name(t) for t in SUN]
    assert entries[0]["bytes"] == list(name(SUN[0]).encode())
    assert [t["token"] for t in entries[0]["top_logprobs"]] == [name(t) for t in ALTERNATIVES[:2]]
    text = "".join((c.get("message") or c.get("delta") or {}).get("content") or "" for c in choices)
    assert text == "日"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_completion_logprobs_name_token_ids_echo_included(stack, stream):
    client, fake = stack
    fake.script.token_ids, fake.script.top_ids = SUN, ALTERNATIVES
    choices = await answer(client, "/v1/completions", COMPLETION, stream)
    logprobs = [c["logprobs"] for c in choices if c.get("logprobs")]
    tokens = [t for block in logprobs for t in block["tokens"]]
    tops = [top for block in logprobs for top in block["top_logprobs"]]
    # The echoed prompt (日), then the answer (日 again, then the eos the fake ends with).
    assert tokens[:6] == [name(t) for t in SUN + SUN]
    assert tops[0] is None and tops[3] == {name(ALTERNATIVES[0]): -1.0, name(ALTERNATIVES[1]): -2.0}
    assert [o for block in logprobs for o in block["text_offset"]][:6] == [0, 0, 0, 1, 1, 1]
    assert "".join(c["text"] for c in choices).startswith("日日")


async def test_without_the_field_tokens_keep_their_text_names(stack):
    client, fake = stack
    fake.script.token_ids, fake.script.top_ids = SUN, ALTERNATIVES
    choice = (await answer(client, "/v1/completions", {**COMPLETION, "return_tokens_as_token_ids": False}, False))[0]
    assert choice["logprobs"]["tokens"][:3] == ["bytes:\\xe6", "bytes:\\x97", "bytes:\\xa5"]
