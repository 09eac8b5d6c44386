"""Unit tests: the ids a raw prompt becomes on every route that takes one (/v1/tokenize, llama.cpp's /tokenize,
/v1/completions, /api/generate raw, /completion, llama-cpp-python's /extras/tokenize) equal transformers' encode of the
text (add_special_tokens=False: the tiny model's tokenizer adds none), special-token text read as the token, as vLLM
and llama.cpp read a completion prompt; and /v1/detokenize gives back transformers' decode (fake scheduler)."""
import orjson
import pytest

from tests.unit.test_chat_template_oracle import HARD, hf_tokenizer
from tests.unit.test_template_hf_sandbox import tiny_stack  # noqa: F401 - tiny_stack is a fixture

TEXTS = HARD + ["x" + " " * 10_000, "\n" * 3000, "a<|endoftext|>b", "  <|im_end|>  ", "<tool_call>{}</tool_call>",
                "\ufeffbom \u2028\u2029", "\U0010ffff", "trailing ", "1234567890" * 30]
ROUTES = {
    "/v1/tokenize": lambda text: {"model": "default", "prompt": text},
    "/tokenize": lambda text: {"content": text},
    "/extras/tokenize": lambda text: {"input": text},
    "/v1/completions": lambda text: {"model": "default", "prompt": text, "max_tokens": 1},
    "/api/generate": lambda text: {"model": "default", "prompt": text, "raw": True, "stream": False,
                                   "options": {"num_predict": 1}},
    "/completion": lambda text: {"prompt": text, "n_predict": 1},
}


@pytest.mark.parametrize("path", ROUTES)
async def test_prompt_ids_are_transformers_encode(tiny_stack, path):
    client, fake = tiny_stack
    for text in TEXTS:
        response = await client.post(path, data=orjson.dumps(ROUTES[path](text)))
        out = orjson.loads(await response.read())
        assert response.status == 200, out
        ids = out["tokens"] if "tokenize" in path else list(fake.script.requests[-1].prompt_token_ids)
        assert ids == hf_tokenizer().encode(text, add_special_tokens=False), repr(text[:40])


async def test_detokenize_is_transformers_decode(tiny_stack):
    client, _ = tiny_stack
    tokenizer = hf_tokenizer()
    for text in TEXTS:
        ids = tokenizer.encode(text, add_special_tokens=False)
        for cut in (len(ids), len(ids) - 1):   # the second may end inside a character: U+FFFD, as decode gives
            body = {"model": "default", "tokens": ids[:cut]}
            out = orjson.loads(await (await client.post("/v1/detokenize", data=orjson.dumps(body))).read())
            assert out["prompt"] == tokenizer.decode(ids[:cut])
