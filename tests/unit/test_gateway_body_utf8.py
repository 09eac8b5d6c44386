"""A request body that is not UTF-8 is a 400 that says so, in each API's own error shape, but on Ollama's routes, which
read it as Go does (fake scheduler). orjson
words any such body "str is not valid UTF-8: surrogates not allowed: line 1 column 1 (char 0)": it named neither the
byte nor its place, and read as a complaint about a surrogate the client never sent."""
import orjson
import pytest

# Latin-1 text where UTF-8 was due: "café" as 63 61 66 e9 (what a client that encodes with the platform's codepage
# sends), at offset 46.
LATIN1 = b'{"messages": [{"role": "user", "content": "caf\xe9"}], "model": "fake-model", "prompt": "x"}'
WORDS = "the request body is not valid UTF-8: byte 0xe9 at offset 46"
OPENAI = ["/v1/chat/completions", "/v1/completions", "/v1/responses", "/api/v0/chat/completions",
          "/api/v0/completions", "/v1/tokenize"]
OLLAMA = ["/api/chat", "/api/generate", "/api/embed", "/api/show"]


async def _post(client, path: str) -> tuple[int, dict]:
    response = await client.post(path, data=LATIN1, headers={"Content-Type": "application/json"})
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("path", OPENAI)
async def test_openai_shape(stack, path):
    client, fake = stack
    status, body = await _post(client, path)
    assert status == 400, body
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["code"] == "invalid_json"
    assert body["error"]["message"].startswith(WORDS), body
    assert "surrogates" not in body["error"]["message"] and fake.script.requests == []


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
async def test_anthropic_shape(stack, path):
    client, _ = stack
    status, body = await _post(client, path)
    assert status == 400 and body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith(WORDS), body


@pytest.mark.parametrize("path", OLLAMA)
async def test_ollama_reads_it_as_go_does(stack, path):
    """Go's encoding/json reads each byte that is no UTF-8 as U+FFFD, so Ollama serves the body (gateway/go_json.py)."""
    client, fake = stack
    response = await client.post(path, data=LATIN1[:-1] + b', "stream": false}')
    status, body = response.status, orjson.loads(await response.read())
    assert not (status == 400 and body.get("error", "").startswith(WORDS)), body
    if path == "/api/chat":
        assert status == 200, body
        prompt = fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
        assert "caf\ufffd<|im_end|>" in prompt


async def test_valid_utf8_with_a_json_error_keeps_the_json_words(stack):
    client, _ = stack
    response = await client.post("/v1/chat/completions", data='{"messages": "café",}'.encode())
    error = (await response.json())["error"]
    assert response.status == 400 and error["message"].startswith("the request body is not valid JSON: ")
