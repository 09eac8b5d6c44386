"""Ollama /api/embed and /api/embeddings with nothing to embed load the model, as Ollama's handlers answer it
(server/routes.go EmbedHandler 'len(input) == 0', EmbeddingsHandler "an empty request loads the model": 200 with no
vector, ollama/ollama#5713, #6295); keep_alive is read as Ollama's bind reads it (api.Duration), its 400 first."""
import orjson
import pytest

from gateway.errors import EMBEDDINGS_UNSUPPORTED

LOADS = [
    ("/api/embed", {"model": "fake-model"}, {"model": "fake-model", "embeddings": []}),
    ("/api/embed", {"model": "fake-model", "input": ""}, {"model": "fake-model", "embeddings": []}),
    ("/api/embed", {"model": "fake-model", "input": []}, {"model": "fake-model", "embeddings": []}),
    ("/api/embed", {"model": "fake-model:latest", "input": None},
     {"model": "fake-model:latest", "embeddings": []}),
    ("/api/embeddings", {"model": "fake-model"}, {"embedding": []}),
    ("/api/embeddings", {"model": "fake-model", "prompt": ""}, {"embedding": []}),
    # Clients that send /api/embed's field to the old route (ollama/ollama#7490, #13020) get Ollama's empty vector.
    ("/api/embeddings", {"model": "fake-model", "input": "hello"}, {"embedding": []}),
]


@pytest.mark.parametrize("path, body, expected", LOADS,
                         ids=["embed no input", "embed empty", "embed empty list", "embed null, as named",
                              "embeddings no prompt", "embeddings empty", "embeddings with input only"])
async def test_nothing_to_embed_is_a_load(stack, path, body, expected):
    client, _ = stack
    await client.post("/api/generate", json={"model": "fake-model", "keep_alive": 0})
    assert (await (await client.get("/api/ps")).json())["models"] == []
    response = await client.post(path, json=body)
    assert response.status == 200 and orjson.loads(await response.read()) == expected
    listed = (await (await client.get("/api/ps")).json())["models"]
    assert [model["name"] for model in listed] == ["fake-model:latest"]


@pytest.mark.parametrize("path", ["/api/embed", "/api/embeddings"])
async def test_keep_alive_zero_load_leaves_no_model_listed(stack, path):
    client, _ = stack
    response = await client.post(path, json={"model": "fake-model", "keep_alive": 0})
    assert response.status == 200
    assert (await (await client.get("/api/ps")).json())["models"] == []


@pytest.mark.parametrize("path, body", [
    ("/api/embed", {"model": "fake-model", "input": [""]}),
    ("/api/embed", {"model": "fake-model", "input": ["a", "b"]}),
    ("/api/embeddings", {"model": "fake-model", "prompt": "hi"}),
], ids=["one empty string", "strings", "prompt"])
async def test_text_to_embed_is_still_the_501(stack, path, body):
    client, _ = stack
    response = await client.post(path, json=body)
    assert response.status == 501
    assert orjson.loads(await response.read()) == {"error": EMBEDDINGS_UNSUPPORTED}


@pytest.mark.parametrize("path, body, expected", [
    ("/api/embed", {"model": "fake-model", "input": "x", "keep_alive": "5d"}, 'time: unknown unit "d" in duration "5d"'),
    ("/api/embed", {"model": "llama3", "keep_alive": "x"}, 'time: invalid duration "x"'),
    ("/api/embeddings", {"prompt": "x", "keep_alive": True}, "Unsupported type: 'bool'"),
    ("/api/embeddings", {"model": "fake-model", "keep_alive": "1h5"}, 'time: missing unit in duration "1h5"'),
], ids=["embed unit", "embed before the 404", "embeddings before model is required", "embeddings load"])
async def test_a_keep_alive_go_refuses_is_its_400_first(stack, path, body, expected):
    """Ollama decodes keep_alive while it binds the body (api.Duration.UnmarshalJSON), so its 400 comes before the
    model is named or looked up; the embedding routes ignored the field (the 501, the 404, or a 200 load)."""
    client, _ = stack
    response = await client.post(path, json=body)
    assert response.status == 400 and orjson.loads(await response.read()) == {"error": expected}


@pytest.mark.parametrize("path, body, expected", [
    ("/api/embed", {"model": "fake-model", "options": {"num_ctx": "big"}}, 'option "num_ctx" must be of type integer'),
    ("/api/embed", {"model": "fake-model", "input": "x", "options": {"use_mmap": 1}},
     'option "use_mmap" must be of type boolean'),
    ("/api/embeddings", {"model": "fake-model", "options": {"temperature": "hot"}},
     'option "temperature" must be of type float32'),
], ids=["embed load", "embed text", "embeddings load"])
async def test_options_of_the_wrong_type_are_refused_first(stack, path, body, expected):
    """Ollama's embedding handlers schedule the runner with the request's options before they read the input
    (modelOptions refuses a value of the wrong type, in these words), so a load or text to embed is refused alike;
    they were a 200 load and the 501."""
    client, _ = stack
    response = await client.post(path, json=body)
    assert response.status == 400 and orjson.loads(await response.read()) == {"error": expected}
