"""Gateway with the fake scheduler: model management and embedding routes name the model they act on. A model this
server does not serve is the 404 every API gives it; only the served model gets the 501 with the reason."""
import orjson
import pytest

NOT_SERVED = "llama3:8b"


@pytest.mark.parametrize("method,path,body,error", [
    ("DELETE", "/api/delete", {"model": NOT_SERVED}, "model 'llama3:8b' not found"),
    ("DELETE", "/api/delete", {"name": NOT_SERVED}, "model 'llama3:8b' not found"),
    ("POST", "/api/copy", {"source": NOT_SERVED, "destination": "x"}, 'model "llama3:8b" not found'),
    ("POST", "/api/embed", {"model": NOT_SERVED, "input": "hi"}, "model 'llama3:8b' not found"),
    ("POST", "/api/embeddings", {"model": NOT_SERVED, "prompt": "hi"},
     'model "llama3:8b" not found, try pulling it first'),
], ids=["delete", "delete by name", "copy", "embed", "embeddings"])
async def test_ollama_route_on_a_model_it_lacks_is_ollamas_404(stack, method, path, body, error):
    """Ollama's DeleteHandler, CopyHandler, EmbedHandler and EmbeddingsHandler answer these bodies for a model that
    is not there; it was a 501 'not supported', which tells a client the route is missing rather than the model."""
    client, servicer = stack
    response = await client.request(method, path, json=body)
    assert response.status == 404 and not servicer.script.requests
    assert orjson.loads(await response.read()) == {"error": error}


@pytest.mark.parametrize("method,path,body,words", [
    ("DELETE", "/api/delete", {"model": "Fake-Model:latest"}, "deleting models is not supported"),
    ("POST", "/api/copy", {"source": "fake-model", "destination": "x"}, "copying models is not supported"),
    ("POST", "/api/embed", {"model": "fake-model", "input": "hi"}, "does not support embeddings"),
    ("POST", "/api/embeddings", {"model": "fake-model", "prompt": "hi"}, "does not support embeddings"),
    ("POST", "/api/pull", {"model": NOT_SERVED}, "pulling models is not supported"),
], ids=["delete", "copy", "embed", "embeddings", "pull"])
async def test_ollama_route_on_the_served_model_is_a_501_with_the_reason(stack, method, path, body, words):
    client, _ = stack
    response = await client.request(method, path, json=body)
    assert response.status == 501 and words in orjson.loads(await response.read())["error"]


async def test_ollama_management_body_that_is_no_json_is_a_400(stack):
    client, _ = stack
    response = await client.post("/api/embed", data=b"{nope")
    # Ollama's words: its handler answers the json.Decoder's error (tests/unit/test_ollama_go_json.py).
    assert response.status == 400
    assert orjson.loads(await response.read()) == {"error": "invalid character 'n' looking for beginning of object key "
                                                            "string"}


@pytest.mark.parametrize("path", ["/v1/embeddings", "/api/v0/embeddings"])
async def test_embeddings_for_a_model_not_served_is_a_404(stack, path):
    """vLLM checks the model before anything else; it was the 501 meant for the served model."""
    client, _ = stack
    response = await client.post(path, json={"model": NOT_SERVED, "input": "hi"})
    assert response.status == 404
    error = orjson.loads(await response.read())["error"]
    assert error["code"] == "model_not_found" and error["param"] == "model" and "llama3:8b" in error["message"]


async def test_pulling_the_served_model_succeeds_as_ollamas_pull_of_a_model_it_has(stack):
    """Ollama's pull of a model it has up to date ends with "success" (clients pull before use); it was a 501."""
    client, servicer = stack
    response = await client.post("/api/pull", json={"model": "Fake-Model"})
    assert response.status == 200 and response.content_type == "application/x-ndjson"
    assert [orjson.loads(line) for line in (await response.read()).splitlines()] == [
        {"status": "pulling manifest"}, {"status": "verifying sha256 digest"}, {"status": "writing manifest"},
        {"status": "success"}]
    response = await client.post("/api/pull", json={"name": "fake-model:latest", "stream": False})
    assert response.status == 200 and orjson.loads(await response.read()) == {"status": "success"}
    response = await client.post("/api/pull", json={})
    assert response.status == 400 and orjson.loads(await response.read()) == {"error": "invalid model name"}
    assert not servicer.script.requests


@pytest.mark.parametrize("method, path, body, status, expected", [
    ("DELETE", "/api/delete", {}, 400, "model is required"),
    ("DELETE", "/api/delete", None, 400, "model is required"),
    ("POST", "/api/copy", {"destination": "x"}, 400, 'source "" is invalid'),
    ("POST", "/api/copy", {"source": "fake-model"}, 400, 'destination "" is invalid'),
    ("POST", "/api/copy", {"source": NOT_SERVED, "destination": ""}, 400, 'destination "" is invalid'),
    ("POST", "/api/embed", {"input": "x"}, 404, "model '' not found"),
    ("POST", "/api/embeddings", {"prompt": "x"}, 400, "model is required"),
    ("POST", "/api/push", {"name": ""}, 400, "model is required"),
    ("POST", "/api/create", {"from": "fake-model"}, 400, "invalid model name"),
    ("POST", "/api/push", {"model": "fake-model", "insecure": "yes"}, 400,
     "json: cannot unmarshal string into Go struct field PushRequest.insecure of type bool"),
], ids=["delete", "delete null body", "copy no source", "copy no destination", "copy unknown source no destination",
        "embed", "embeddings", "push", "create", "push insecure string"])
async def test_a_request_naming_no_model_is_ollamas_4xx_not_the_501(stack, method, path, body, status, expected):
    """Ollama's handlers decode the body, then parse the model reference, and an empty one fails there (server/
    routes.go DeleteHandler, CopyHandler, EmbedHandler, EmbeddingsHandler, PushHandler); here such a request got the
    501 'not supported', which reads as the server's limit, not the request's fault."""
    client, servicer = stack
    response = await client.request(method, path, data=orjson.dumps(body), headers={"Content-Type": "application/json"})
    assert response.status == status and orjson.loads(await response.read()) == {"error": expected}
    assert not servicer.script.requests


@pytest.mark.parametrize("path, status, expected", [
    ("/api/show", 400, "model is required"), ("/api/chat", 400, "model is required"),
    ("/api/generate", 404, "model '' not found"), ("/api/pull", 400, "invalid model name")])
async def test_a_null_body_is_the_empty_struct_as_go_decodes_it(stack, path, status, expected):
    """encoding/json decodes a null body into the empty struct without error, so Ollama answers its handler's 4xx for
    the missing model (GenerateHandler's is its 404 fallback, PullHandler's 'invalid model name'); here it was 'json:
    cannot unmarshal object into Go value' or 'must be a JSON object'."""
    client, _ = stack
    response = await client.post(path, data=b"null", headers={"Content-Type": "application/json"})
    assert response.status == status and orjson.loads(await response.read()) == {"error": expected}


@pytest.mark.parametrize("body", [
    {"model": "fake-model", "input": 5},
    {"model": "fake-model", "input": ["hi", 3]},
    {"model": "fake-model", "input": [[1, 2]]},
    {"model": "fake-model", "input": {"text": "hi"}},
    {"model": NOT_SERVED, "input": True},
], ids=["number", "list with a number", "token ids", "object", "model it lacks"])
async def test_embed_input_that_is_no_text_is_ollamas_400(stack, body):
    """Ollama's EmbedHandler takes input as a string or a list of strings; any other value is its 400 'invalid input
    type', checked before it looks the model up (server/routes.go EmbedHandler). It was the 501 'not supported' (or
    the 404 for a model it lacks), which blames the server for the client's malformed body."""
    client, _ = stack
    response = await client.post("/api/embed", json=body)
    assert response.status == 400 and orjson.loads(await response.read()) == {"error": "invalid input type"}


@pytest.mark.parametrize("value", [["a", "b"], [""], "hi"], ids=["strings", "one empty string", "text"])
async def test_embed_text_input_still_gets_the_501(stack, value):
    """Text to embed is the 501; no input at all is a load (test_ollama_embed_load.py), as Ollama answers it."""
    client, _ = stack
    response = await client.post("/api/embed", json={"model": "fake-model", "input": value})
    assert response.status == 501
