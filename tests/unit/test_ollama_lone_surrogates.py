"""Ollama's routes read a lone UTF-16 surrogate escape ("\\ud83d": a JavaScript client that cut a string inside an
emoji sends one, JSON.stringify writes it so) as U+FFFD, as Go's encoding/json reads it under Ollama ("invalid UTF-16
surrogate pairs are not treated as an error. Instead, they are replaced by the Unicode replacement character
U+FFFD", json.Unmarshal); it was a 400 "no low surrogate in string". A JSON fault Go refuses keeps its 400 (fake
scheduler; what follows the first value, which Go never reads: test_ollama_go_json.py)."""
import orjson
import pytest

# Raw JSON text: each \u escape as the client wrote it.
CASES = {
    "high alone": (rb"caf\ud83d", "caf\ufffd"),
    "low alone": (rb"\ude00 ok", "\ufffd ok"),
    "high before a letter": (rb"a\ud83d\u0041b", "a\ufffdAb"),
    "two highs": (rb"\ud83d\ud83d\ude00", "\ufffd\U0001F600"),
    "a whole pair": (rb"\ud83d\ude00", "\U0001F600"),
}


def _chat(content: bytes) -> bytes:
    return (b'{"model": "fake-model", "stream": false, "_debug_render_only": true, '
            b'"messages": [{"role": "user", "content": "' + content + b'"}]}')


@pytest.mark.parametrize("case", list(CASES))
async def test_a_lone_surrogate_in_a_chat_message_is_read_as_u_fffd(stack, case):
    client, _ = stack
    escaped, text = CASES[case]
    response = await client.post("/api/chat", data=_chat(escaped), headers={"Content-Type": "application/json"})
    answer = orjson.loads(await response.read())
    assert response.status == 200, answer
    assert f"<|im_start|>user\n{text}<|im_end|>" in answer["_debug_info"]["rendered_template"]


async def test_a_lone_surrogate_in_a_generate_prompt_and_a_key_is_read_as_u_fffd(stack):
    client, fake = stack
    body = rb'{"model": "fake-model", "stream": false, "raw": true, "prompt": "x\udc00y", "options": {"\ud800": 1}}'
    response = await client.post("/api/generate", data=body, headers={"Content-Type": "application/json"})
    answer = orjson.loads(await response.read())
    assert response.status == 200 and answer["response"] == "Hello world", answer
    prompt = fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
    assert prompt == "x\ufffdy"


@pytest.mark.parametrize("body, words", [
    (rb'{"model": "fake-model", "prompt": "\ud800", }', "invalid character '}' looking for beginning of object key "
                                                        "string"),
])
async def test_other_faults_beside_a_lone_surrogate_keep_their_400(stack, body, words):
    client, _ = stack
    response = await client.post("/api/generate", data=body, headers={"Content-Type": "application/json"})
    answer = orjson.loads(await response.read())
    assert response.status == 400 and answer["error"].startswith(words), answer


async def test_the_openai_routes_keep_refusing_a_lone_surrogate(stack):
    """llama.cpp's nlohmann::json refuses one ("surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"), and
    vLLM cannot tokenize one (a Python str with a surrogate is no UTF-8 for tokenizers)."""
    client, _ = stack
    body = rb'{"model": "fake-model", "messages": [{"role": "user", "content": "caf\ud83d"}]}'
    response = await client.post("/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
    error = orjson.loads(await response.read())["error"]
    assert response.status == 400 and "surrogate" in error["message"] and error["code"] == "invalid_json"
