"""llama-cpp-python's server extras (llama_cpp/server/app.py): /extras/tokenize and /extras/tokenize/count take
{"input", "model"} and answer {"tokens"} / {"count"}, /extras/detokenize takes {"tokens"} and answers {"text"}, and
/v1/engines/copilot-codex/completions is its completions route under Copilot's path. Clients of that server use them
(llama-cpp-agent's LlamaCppServerProvider with llama_cpp_python_server=True tokenizes at /extras/tokenize and completes
at the Copilot path; context-budget code counts at /extras/tokenize/count); all four were 404s here."""
import orjson
import pytest

TEXT = "Hello world, the quick brown fox"


async def _post(client, path: str, body: dict) -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def test_tokenize_gives_the_ids_the_prompt_has(stack):
    client, _ = stack
    status, answer = await _post(client, "/extras/tokenize", {"input": TEXT})
    assert status == 200, answer
    _, reference = await _post(client, "/v1/tokenize", {"prompt": TEXT})
    assert answer == {"tokens": reference["tokens"]} and answer["tokens"]


async def test_count_is_the_number_of_those_ids(stack):
    client, _ = stack
    status, answer = await _post(client, "/extras/tokenize/count", {"input": TEXT, "model": "fake-model"})
    assert status == 200, answer
    _, tokens = await _post(client, "/extras/tokenize", {"input": TEXT})
    assert answer == {"count": len(tokens["tokens"])}


async def test_detokenize_gives_the_text_back(stack):
    client, _ = stack
    _, tokens = await _post(client, "/extras/tokenize", {"input": TEXT})
    status, answer = await _post(client, "/extras/detokenize", {"tokens": tokens["tokens"]})
    assert (status, answer) == (200, {"text": TEXT})


@pytest.mark.parametrize("path, body, status", [
    ("/extras/tokenize", {}, 400),
    ("/extras/tokenize/count", {"input": 3}, 400),
    ("/extras/detokenize", {"tokens": [-1]}, 400),
    ("/extras/detokenize", {"tokens": [10 ** 9]}, 400),
    ("/extras/tokenize", {"input": "hi", "model": "no-such-model"}, 404),
], ids=["no-input", "input-not-text", "negative-id", "id-past-vocab", "unknown-model"])
async def test_bad_bodies_are_refused_with_the_reason(stack, path, body, status):
    client, _ = stack
    got, answer = await _post(client, path, body)
    assert got == status and answer["error"]["message"]


async def test_the_copilot_path_is_the_completions_route(stack):
    client, _ = stack
    status, answer = await _post(client, "/v1/engines/copilot-codex/completions", {"prompt": "hi", "max_tokens": 3})
    assert status == 200, answer
    assert answer["object"] == "text_completion" and answer["usage"]["completion_tokens"] == 3
    assert isinstance(answer["choices"][0]["text"], str)
