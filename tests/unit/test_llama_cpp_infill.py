"""llama.cpp's POST /infill (fake scheduler): the fill-in-the-middle prompt its server builds
(tools/server/server-common.cpp format_prompt_infill, server-context.cpp handle_infill), answered as /completion; it
was a 501 whatever the model, where llama.vscode and llama.vim complete code through this route only."""
import orjson
import pytest
from tokenizers import AddedToken

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

FIM = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>", "<|file_sep|>")


def fim_tokenizer():
    """The fake tokenizer with Qwen's FIM tokens (Qwen2.5-Coder's and Qwen3's added tokens), as special tokens."""
    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens([AddedToken(text, special=True, normalized=False) for text in FIM])
    return tokenizer


@pytest.fixture
async def fim_stack():
    tokenizer = fim_tokenizer()
    async with fake_gateway(FakeServing(tokenizer, max_context_len=4096)) as (client, fake):
        yield client, fake, tokenizer


def ids(tokenizer, text):
    return tokenizer.encode(text, add_special_tokens=False).ids


async def post(client, body):
    response = await client.post("/infill", data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def test_the_prompt_is_llama_cpps_repo_level_fim_pattern(fim_stack):
    client, fake, tok = fim_stack
    pre, suf, mid, rep, sep = (tok.token_to_id(text) for text in FIM)
    body = {"input_prefix": "def f(x):\n    ", "input_suffix": "\n    return y\n", "prompt": "y = ",
            "input_extra": [{"filename": "a.py", "text": "X = 1\n"}], "n_predict": 3, "n_indent": 4}
    status, answer = await post(client, body)
    assert status == 200, answer
    expected = ([rep, *ids(tok, "myproject\n"), sep, *ids(tok, "a.py\n"), *ids(tok, "X = 1\n"), sep,
                 *ids(tok, "filename\n"), pre, *ids(tok, "def f(x):\n    "), *ids(tok, "y = "), suf,
                 *ids(tok, "\n    return y\n"), mid])
    assert list(fake.script.requests[0].prompt_token_ids) == expected
    assert (answer["content"], answer["stop"], answer["tokens_evaluated"]) == ("Hello world", True, len(expected))


async def test_the_prefix_keeps_its_end_and_the_suffix_its_start(fim_stack):
    """llama.cpp fits prefix and suffix in one batch (2048), 3:1: the last 1536 prefix tokens, the first 512 - 2 -
    len(prompt) suffix tokens."""
    client, fake, tok = fim_stack
    prefix, suffix = "a " * 3000, "b " * 3000
    status, answer = await post(client, {"input_prefix": prefix, "input_suffix": suffix, "n_predict": 1})
    assert status == 200, answer
    sent = list(fake.script.requests[0].prompt_token_ids)
    pre, suf, mid = (tok.token_to_id(text) for text in FIM[:3])
    assert sent[sent.index(pre) + 1:sent.index(suf)] == ids(tok, prefix)[-1536:]
    assert sent[sent.index(suf) + 1:sent.index(mid)] == ids(tok, suffix)[:510]


@pytest.mark.parametrize("body, message", [
    ({"input_suffix": ""}, '"input_prefix" is required'),
    ({"input_prefix": ""}, '"input_suffix" is required'),
    ({"input_prefix": "", "input_suffix": "", "prompt": 1}, '"prompt" must be a string'),
    ({"input_prefix": "", "input_suffix": "", "input_extra": {}}, '"input_extra" must be an array'),
    ({"input_prefix": "", "input_suffix": "", "input_extra": [{"filename": "a"}]},
     'extra_context chunk must contain a "text" field'),
], ids=["no-prefix", "no-suffix", "prompt-not-string", "extra-not-list", "chunk-without-text"])
async def test_a_bad_body_is_llama_cpps_400(fim_stack, body, message):
    client, fake, _ = fim_stack
    status, answer = await post(client, body)
    assert status == 400 and answer["error"]["message"].startswith(message), answer
    assert answer["error"]["type"] == "invalid_request_error" and fake.script.requests == []
