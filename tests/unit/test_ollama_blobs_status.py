"""Ollama's blob routes, GET /api/status and cloud model names over the fake scheduler: the answers Ollama's handlers
give (server/routes.go HeadBlobHandler, CreateBlobHandler, StatusHandler, and its cloud proxy while the cloud is off)
where this server keeps no blobs and serves no cloud model."""
import pytest

DIGEST = "sha256:" + "ab" * 32


async def test_head_of_a_blob_is_404_not_found(stack):
    """No blob is kept here: HEAD answers Ollama's 404 for a blob it lacks, so a client that checks before it uploads
    goes on to the POST, whose body says why (a 501 to HEAD carried no reason)."""
    client, _ = stack
    response = await client.head(f"/api/blobs/{DIGEST}")
    assert response.status == 404 and await response.read() == b""
    response = await client.post(f"/api/blobs/{DIGEST}", data=b"GGUF")
    assert response.status == 501
    assert await response.json() == {"error": "model blobs are not supported: the served model is fixed when the "
                                              "server starts"}


@pytest.mark.parametrize("digest", ["sha256:abc", "md5:" + "ab" * 16, DIGEST + "0", "sha256:" + "zz" * 32],
                         ids=["short", "other algorithm", "long", "not hex"])
@pytest.mark.parametrize("method", ["HEAD", "POST"])
async def test_a_digest_that_is_no_sha256_is_ollamas_400(stack, method, digest):
    client, _ = stack
    response = await client.request(method, f"/api/blobs/{digest}", data=b"x")
    assert response.status == 400
    if method == "POST":
        assert await response.json() == {"error": "invalid digest format"}


async def test_head_takes_ollamas_dash_form_of_a_digest(stack):
    client, _ = stack
    assert (await client.head("/api/blobs/sha256-" + "AB" * 32)).status == 404


async def test_status_says_cloud_is_disabled(stack):
    """api.StatusResponse: Ollama's CLI reads cloud.disabled before it tries a cloud model (cmd/launch/models.go)."""
    client, _ = stack
    response = await client.get("/api/status")
    assert response.status == 200 and response.headers["Content-Type"] == "application/json; charset=utf-8"
    assert await response.json() == {"cloud": {"disabled": True, "source": "config"}}


@pytest.mark.parametrize("path, extra, words", [
    ("/api/chat", {"messages": [{"role": "user", "content": "hi"}]}, "remote model is unavailable"),
    ("/api/generate", {"prompt": "hi"}, "remote model is unavailable"),
    ("/api/show", {}, "remote model details are unavailable"),
    ("/api/embed", {"input": 5}, "remote model is unavailable"),
    ("/api/embeddings", {"prompt": "hi"}, "remote model is unavailable"),
], ids=["chat", "generate", "show", "embed", "embeddings"])
@pytest.mark.parametrize("name", ["gpt-oss:120b-cloud", "qwen3-coder:480b-CLOUD", "deepseek-v3.1:671b:cloud",
                                  " kimi-k2:cloud "])
async def test_a_cloud_model_is_ollamas_403_with_its_cloud_off(stack, path, extra, words, name):
    """modelref.parseSourceSuffix reads a ":cloud" or "-cloud" suffix; with the cloud off (what /api/status says)
    Ollama's handlers answer 403 before they look the model up (server/cloud_proxy.go proxyCloudRequestWithPath),
    where a 404 "model not found" had clients offer to pull it."""
    client, servicer = stack
    response = await client.post(path, json={"model": name, "stream": False, **extra})
    assert response.status == 403 and not servicer.script.requests
    assert await response.json() == {"error": f"ollama cloud is disabled: {words}"}


@pytest.mark.parametrize("name", ["mycloud", "x:cloudy", "ns/cloud", "cloud:latest"])
async def test_a_name_without_the_cloud_suffix_stays_a_404(stack, name):
    client, _ = stack
    response = await client.post("/api/show", json={"model": name})
    assert response.status == 404 and await response.json() == {"error": f"model '{name}' not found"}


@pytest.mark.parametrize("path, words", [("/api/experimental/web_search", "web search is unavailable"),
                                         ("/api/experimental/web_fetch", "web fetch is unavailable")])
async def test_ollamas_web_tools_are_its_403_with_the_cloud_off(stack, path, words):
    """Ollama's cloud runs them (server/routes.go webExperimentalProxyHandler): with it off, 403 in its words, after
    its 400 for an empty body."""
    client, _ = stack
    response = await client.post(path, json={"query": "sparkinfer"})
    assert response.status == 403 and await response.json() == {"error": f"ollama cloud is disabled: {words}"}
    empty = await client.post(path, data=b"  ")
    assert empty.status == 400 and await empty.json() == {"error": "missing request body"}
