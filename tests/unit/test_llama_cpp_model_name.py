"""A llama.cpp client's /v1 request (one naming llama.cpp's own fields) takes any model name, as llama-server, which
serves one model, never reads it (fake scheduler); any other client keeps vLLM's 404 for an unknown name."""
import pytest

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.mark.parametrize("path, body", [("/v1/chat/completions", CHAT),
                                        ("/v1/completions", {"prompt": "hi", "max_tokens": 2})],
                         ids=["chat", "completions"])
async def test_a_llama_cpp_client_names_any_model(stack, path, body):
    # llamafile's README calls its server with model="LLaMA_CPP", and llama.cpp clients send whatever model they were
    # set up with (mozilla-ai/llamafile#331: one model a server, named by -m). Before, such a request with
    # llama.cpp's cache_prompt was the 404 "The model 'LLaMA_CPP' does not exist".
    client, _ = stack
    response = await client.post(path, json={"model": "LLaMA_CPP", "cache_prompt": True, **body})
    assert response.status == 200, await response.text()
    assert (await response.json())["model"] == "fake-model"
    response = await client.post(path, json={"model": "LLaMA_CPP", **body})
    assert response.status == 404
    assert (await response.json())["error"]["code"] == "model_not_found"
