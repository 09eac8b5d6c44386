"""A body that is no JSON gets Ollama's 400 in Go's words: gin's ShouldBindJSON is a json.Decoder, whose error
Ollama's handlers answer as it is (server/routes.go; encoding/json/scanner.go words each state's refusal)."""
import pytest

from gateway.go_json import go_decode_error

# (body, what Go's json.Decoder.Decode answers: encoding/json SyntaxError text or io.ErrUnexpectedEOF)
GO_WORDS = [
    (b'{"model": "x", "prompt": "hi",}', "invalid character '}' looking for beginning of object key string"),
    (b"{'model': 'x'}", "invalid character '\\'' looking for beginning of object key string"),
    (b'{"model": "x"', "unexpected EOF"),
    (b'{"model" "x"}', "invalid character '\"' after object key"),
    (b'{"model": "x" "stream": false}', "invalid character '\"' after object key:value pair"),
    (b'{"context": [1 2]}', "invalid character '2' after array element"),
    (b'{"raw": True}', "invalid character 'T' looking for beginning of value"),
    (b'{"raw": tru}', "invalid character '}' in literal true (expecting 'e')"),
    (b'{"raw": fals', "unexpected EOF"),
    (b'{"options": {"seed": -x}}', "invalid character 'x' in numeric literal"),
    (b'{"options": {"seed": 1.}}', "invalid character '}' after decimal point in numeric literal"),
    (b'{"options": {"seed": 1e}}', "invalid character '}' in exponent of numeric literal"),
    (b'{"options": {"seed": 01}}', "invalid character '1' after object key:value pair"),
    (b'{"prompt": "a\\qb"}', "invalid character 'q' in string escape code"),
    (b'{"prompt": "\\u12g4"}', "invalid character 'g' in \\u hexadecimal character escape"),
    (b'{"prompt": "a\nb"}', "invalid character '\\n' in string literal"),
    (b'{"prompt": "a\tb"}', "invalid character '\\t' in string literal"),
    (b'{"prompt": "a\x01b"}', "invalid character '\\x01' in string literal"),
    (b'{"messages": [,]}', "invalid character ',' looking for beginning of value"),
    (b'\xef\xbb\xbf{"model": "x" x}', "invalid character '\u00ef' looking for beginning of value"),
    (b'{"model": \xa0}', "invalid character '\\u00a0' looking for beginning of value"),
]


@pytest.mark.parametrize("raw, words", GO_WORDS, ids=[w for _, w in GO_WORDS])
def test_go_decoder_words(raw, words):
    assert go_decode_error(raw) == words


@pytest.mark.parametrize("raw", [b'{"model": "x"} {"model": "y"}', b'{"model": "x"}}', b'{"a": [1, {"b": null}]}x'],
                         ids=["second value", "extra brace", "garbage after"])
def test_what_follows_a_whole_first_value_is_never_read(raw):
    """json.Decoder stops at the first value's end: Go reads these bodies."""
    assert go_decode_error(raw) is None


@pytest.mark.parametrize("path", ["/api/chat", "/api/generate", "/api/show", "/api/pull", "/api/delete"])
async def test_ollama_routes_answer_a_body_that_is_no_json_in_gos_words(stack, path):
    client, servicer = stack
    method = "DELETE" if path == "/api/delete" else "POST"
    response = await client.request(method, path, data=b'{"model": "fake-model",}')
    assert response.status == 400 and not servicer.script.requests
    assert await response.json() == {"error": "invalid character '}' looking for beginning of object key string"}
    response = await client.request(method, path, data=b'{"model": "fake-model"')
    assert await response.json() == {"error": "unexpected EOF"}


@pytest.mark.parametrize("path, struct", [("/api/chat", "ChatRequest"), ("/api/generate", "GenerateRequest")])
async def test_a_body_that_is_no_object_is_gos_unmarshal_error(stack, path, struct):
    client, _ = stack
    response = await client.post(path, data=b'[{"model": "fake-model"}]')
    assert response.status == 400
    assert await response.json() == {"error": f"json: cannot unmarshal array into Go value of type api.{struct}"}


async def test_openai_routes_keep_their_own_words(stack):
    client, _ = stack
    response = await client.post("/v1/chat/completions", data=b'{"model": "fake-model",}')
    assert response.status == 400
    assert (await response.json())["error"]["message"].startswith("the request body is not valid JSON")


# Bodies orjson refuses that Go's json.Decoder reads, so Ollama serves them: encoding/json replaces invalid UTF-8 and
# invalid UTF-16 surrogates in a string with U+FFFD (its Unmarshal doc; decode.go unquote: one per byte that is no
# UTF-8, as utf8.DecodeRune reads it), and gin's decodeJSON decodes one value, leaving what follows it unread.
GO_READS = [
    (b'{"model": "fake-model", "raw": true, "prompt": "caf\xe9 ok"}', "caf\ufffd ok"),
    (b'{"model": "fake-model", "raw": true, "prompt": "\xe6\x97x"}', "\ufffd\ufffdx"),
    (b'{"model": "fake-model", "raw": true, "prompt": "hi \\ud83c"}', "hi \ufffd"),
    (b'{"model": "fake-model", "raw": true, "prompt": "\\udf89\\ud83c\\ud83c\\udf89\\u0041"}', "\ufffd\ufffd\U0001f389A"),
    (b'{"model": "fake-model", "raw": true, "prompt": "a\\\\ud83c"}', "a\\ud83c"),
    (b'{"model": "fake-model", "raw": true, "prompt": "hi"} {"prompt": "no"}', "hi"),
    (b'{"model": "fake-model", "raw": true, "prompt": "hi"}\n\xff garbage', "hi"),
]


@pytest.mark.parametrize("raw, prompt", GO_READS,
                         ids=["latin-1 byte", "cut character", "lone high surrogate", "surrogates out of order",
                              "escaped backslash", "second value", "bytes after"])
async def test_a_body_go_reads_is_served_as_ollama_reads_it(stack, raw, prompt):
    client, fake = stack
    response = await client.post("/api/generate", data=raw, headers={"Content-Type": "application/json"})
    assert response.status == 200, await response.text()
    served = fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
    assert served == prompt


async def test_the_openai_routes_still_refuse_those_bodies(stack):
    """OpenAI's API answers a body that is no UTF-8 with its 400 ('Your request contained invalid JSON: 'utf-8' codec
    can't decode byte 0xe9'), as vLLM's json.loads does: only Ollama's routes read them as Go does."""
    client, fake = stack
    response = await client.post("/v1/completions", data=GO_READS[0][0])
    assert response.status == 400 and not fake.script.requests
    assert (await response.json())["error"]["message"].startswith("the request body is not valid UTF-8: byte 0xe9")
