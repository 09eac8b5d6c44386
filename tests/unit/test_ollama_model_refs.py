"""Ollama model names read as Ollama's model reference parse reads them (internal/modelref ParseRef, types/model
ParseName, server/routes.go writeModelRefParseError): whitespace around a name and a ":local" suffix are ignored, a
name that is no Ollama name is its 400 "invalid model name" (not the 404 of a model it lacks), and a body naming no
model is each handler's own answer (/api/generate: 404 "model '' not found")."""
import orjson
import pytest

from gateway.ollama_names import valid_name

CHAT = {"messages": [{"role": "user", "content": "hi"}], "stream": False, "think": False}
GENERATE = {"prompt": "hi", "stream": False, "think": False}


@pytest.mark.parametrize("name", ["fake-model", "fake-model:latest", "library/fake-model",
                                  "hf.co/user/Repo-GGUF:Q4_K_M", "host:5000/ns/model",
                                  "https://registry.ollama.ai/library/x:latest", "_x.y-z:v1.2"])
def test_ollama_names(name):
    assert valid_name(name)


@pytest.mark.parametrize("name", ["fake-model:", "fake model", "h/n/m/x", "a.b/model", "/model", "-model",
                                  "model@sha256:abc", "x" * 81])
def test_not_ollama_names(name):
    assert not valid_name(name)


@pytest.mark.parametrize("path, extra", [("/api/chat", CHAT), ("/api/generate", GENERATE)])
@pytest.mark.parametrize("name", [" fake-model ", "fake-model\n", "fake-model:local", "Fake-Model:latest:LOCAL"])
async def test_the_served_model_named_as_ollama_reads_it_answers(stack, path, extra, name):
    """The name comes back as sent, as Ollama echoes req.Model."""
    client, servicer = stack
    response = await client.post(path, json={"model": name, **extra})
    body = orjson.loads(await response.read())
    assert response.status == 200 and body["model"] == name and body["done"] is True
    assert len(servicer.script.requests) == 1


@pytest.mark.parametrize("path, extra", [("/api/chat", CHAT), ("/api/generate", GENERATE), ("/api/show", {}),
                                         ("/api/embed", {"input": "x"}), ("/api/embeddings", {"prompt": "x"})])
@pytest.mark.parametrize("name", ["fake-model:", "fake model", "llama3@sha256:abc"])
async def test_a_name_that_is_no_ollama_name_is_its_400(stack, path, extra, name):
    client, servicer = stack
    response = await client.post(path, json={"model": name, **extra})
    assert response.status == 400 and orjson.loads(await response.read()) == {"error": "invalid model name"}
    assert not servicer.script.requests


@pytest.mark.parametrize("method, path, body, expected", [
    ("POST", "/api/pull", {"model": "fake model"}, "invalid model name"),
    ("DELETE", "/api/delete", {"model": "fake model"}, 'name "fake model" is invalid'),
    ("POST", "/api/copy", {"source": "fake model", "destination": "x"}, 'source "fake model" is invalid'),
], ids=["pull", "delete", "copy"])
async def test_management_routes_give_their_own_words(stack, method, path, body, expected):
    client, _ = stack
    response = await client.request(method, path, json=body)
    assert response.status == 400 and orjson.loads(await response.read()) == {"error": expected}


@pytest.mark.parametrize("path, extra, status, expected", [
    ("/api/generate", GENERATE, 404, "model '' not found"),
    ("/api/generate", {**GENERATE, "model": "  "}, 404, "model '  ' not found"),
    ("/api/chat", CHAT, 400, "model is required"),
    ("/api/chat", {**CHAT, "model": "  "}, 400, "model is required"),
    ("/api/show", {"model": "  "}, 400, "model is required"),
    ("/api/pull", {}, 400, "invalid model name"),
], ids=["generate", "generate blank", "chat", "chat blank", "show blank", "pull"])
async def test_a_body_naming_no_model_is_each_handlers_answer(stack, path, extra, status, expected):
    client, servicer = stack
    response = await client.post(path, json=extra)
    assert response.status == status and orjson.loads(await response.read()) == {"error": expected}
    assert not servicer.script.requests


async def test_a_valid_name_of_a_model_not_served_stays_the_404(stack):
    client, _ = stack
    response = await client.post("/api/chat", json={"model": "llama3:8b", **CHAT})
    assert response.status == 404 and orjson.loads(await response.read()) == {"error": "model 'llama3:8b' not found"}


@pytest.mark.parametrize("method, path, body, status, expected", [
    ("DELETE", "/api/delete", {"model": "  "}, 400, "model is required"),
    ("POST", "/api/embed", {"model": "  ", "input": "x"}, 404, "model '  ' not found"),
    ("POST", "/api/embeddings", {"model": " ", "prompt": "x"}, 400, "model is required"),
    ("POST", "/api/copy", {"source": "  ", "destination": "x"}, 400, 'source "  " is invalid'),
], ids=["delete", "embed", "embeddings", "copy"])
async def test_a_blank_name_on_a_management_route_names_no_model(stack, method, path, body, status, expected):
    """DeleteHandler, EmbedHandler and EmbeddingsHandler trim the name (modelref.ParseRef), so a blank one is their
    missing-model answer; CopyHandler parses its source as sent, which no Ollama name is."""
    client, _ = stack
    response = await client.request(method, path, json=body)
    assert response.status == status and orjson.loads(await response.read()) == {"error": expected}
