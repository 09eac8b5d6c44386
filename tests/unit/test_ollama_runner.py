"""Gateway with the fake scheduler over loopback: Ollama's `runner` field (chat and generate) is one of the runner
names its normalizeRunner takes, and it and top_logprobs are checked before the model is looked up
(server/routes.go ChatHandler, GenerateHandler; the manifest package's Runner* names)."""
import pytest

HI = [{"role": "user", "content": "Hi"}]


def _body(path: str, **fields) -> dict:
    body = {"model": "fake-model", "stream": False, "options": {"num_predict": 2}, **fields}
    body.update({"messages": HI} if path == "/api/chat" else {"prompt": "Hi"})
    return body


@pytest.mark.parametrize("path", ["/api/chat", "/api/generate"])
@pytest.mark.parametrize("runner", ["", "mlx", "MLXRunner", "ollama", "ggml", " llama.cpp ", "llama-cpp",
                                    "llama_cpp", "llamacpp"])
async def test_a_runner_ollama_names_is_taken(fake, path, runner):
    client, servicer = fake
    servicer.script.reply = "Hello world"
    response = await client.post(path, json=_body(path, runner=runner, think=False))
    answer = await response.json()
    assert response.status == 200, answer
    assert answer["done"] is True and (answer.get("response") or answer["message"]["content"]) == "Hello world"


@pytest.mark.parametrize("path", ["/api/chat", "/api/generate"])
@pytest.mark.parametrize("fields, status, error", [
    ({"runner": "vllm"}, 400, 'unknown runner "vllm"'),
    # Before the model: a model it does not have still gets the runner's 400 (it was the 404).
    ({"runner": "gpu", "model": "nope"}, 400, 'unknown runner "gpu"'),
    ({"top_logprobs": 21, "model": "nope"}, 400, "top_logprobs must be between 0 and 20"),
], ids=["unknown runner", "unknown runner before the model", "top_logprobs before the model"])
async def test_refused_before_the_model_in_ollama_words(fake, path, fields, status, error):
    client, _ = fake
    response = await client.post(path, json=_body(path, **fields))
    assert (response.status, await response.json()) == (status, {"error": error})


async def test_a_runner_that_is_no_string_is_go_decode_error(fake):
    client, _ = fake
    response = await client.post("/api/chat", json=_body("/api/chat", runner=1))
    assert (response.status, await response.json()) == (
        400, {"error": "json: cannot unmarshal number into Go struct field ChatRequest.runner of type string"})
