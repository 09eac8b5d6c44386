"""Gateway with the fake scheduler: what this server does not do is refused in llama-server's words, its sentence kept
whole (with its period) before the reason: every embedding route (the words Ollama passes through too), reranking and
slot actions. Clients match the sentence to tell "this server cannot" from a failure."""
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


@pytest.mark.parametrize("path,sentence", [
    ("/rerank", "This server does not support reranking."),
    ("/v1/reranking", "This server does not support reranking."),
    ("/slots/0?action=save", "This server does not support slots action."),
    ("/slots/0?action=erase", "This server does not support slots action."),
], ids=["rerank", "v1 reranking", "slot save", "slot erase"])
async def test_rerank_and_slot_actions_keep_llama_servers_sentence(stack, path, sentence):
    """llama-server: 'This server does not support reranking. Start it with `--reranking`' and 'This server does not
    support slots action. Start it with `--slot-save-path`' (server-context.cpp); clients check the first sentence as
    a substring, period included (a slot manager's 'could not restore slot 0 (HTTP 501): This server does not support
    slots action.')."""
    client, _ = stack
    response = await client.post(path, json={"query": "q", "documents": ["d"], "filename": "slot.bin"})
    error = (await response.json())["error"]
    assert response.status == 501 and error["type"] == "not_supported_error"
    assert error["message"].startswith(sentence + " ") and "Start it with" not in error["message"]
