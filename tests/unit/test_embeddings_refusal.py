"""Gateway with the fake scheduler: every embedding route refuses in the words llama-server and Ollama use for a server
that does not embed, which clients match to tell "this server cannot embed" from a failure."""
import orjson
import pytest

# llama-server without --embeddings (server-context.cpp handle_embeddings_impl), and Ollama 0.32/0.33 passing it
# through for a chat model's /api/embed: {"error": "This server does not support embeddings. Start it with
# `--embeddings`"}; clients' markers (CANNOT_EMBED_MARKERS and the like) look for the sentence before the flag.
LLAMA_SERVER_WORDS = "This server does not support embeddings."

ROUTES = [
    ("/embedding", {"content": "hi"}, lambda body: body["error"]["message"]),
    ("/embeddings", {"content": "hi"}, lambda body: body["error"]["message"]),
    ("/v1/embeddings", {"model": "fake-model", "input": "hi"}, lambda body: body["error"]["message"]),
    ("/api/v0/embeddings", {"model": "fake-model", "input": "hi"}, lambda body: body["error"]["message"]),
    ("/api/embed", {"model": "fake-model", "input": "hi"}, lambda body: body["error"]),
    ("/api/embeddings", {"model": "fake-model", "prompt": "hi"}, lambda body: body["error"]),
]


@pytest.mark.parametrize("path,body,message", ROUTES, ids=[route[0] for route in ROUTES])
async def test_embedding_routes_refuse_in_llama_servers_words(stack, path, body, message):
    client, servicer = stack
    response = await client.post(path, json=body)
    answer = orjson.loads(await response.read())
    assert response.status == 501 and not servicer.script.requests
    assert message(answer).startswith(LLAMA_SERVER_WORDS), answer
    # The remedy llama.cpp names (restart with --embeddings) is not one here; the reason is given instead.
    assert "--embeddings" not in message(answer) and "generative model only" in message(answer)
