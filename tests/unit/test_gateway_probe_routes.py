"""The small routes clients and orchestrators probe first (/ping, /metrics, /api/v0/models) on the real gateway app
over a fake scheduler."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

TOKENIZER = build_tokenizer()
TEXT_004 = "text/plain; version=0.0.4; charset=utf-8"


@pytest.mark.parametrize("method", ["GET", "POST", "HEAD"])
async def test_ping_answers_as_health(method):
    """vLLM serves GET and POST /ping (SageMaker's liveness probe) as /health; it was a 404 here."""
    async with fake_gateway(FakeServing(TOKENIZER)) as (client, _):
        response = await client.request(method, "/ping")
        assert response.status == 200
        if method != "HEAD":
            assert (await response.json())["status"] == "ok"


async def test_ping_needs_no_api_key_as_health():
    async with fake_gateway(FakeServing(TOKENIZER), api_key="s3cret") as (client, _):
        assert (await client.get("/ping")).status == 200
        assert (await client.post("/ping")).status == 200
        assert (await client.get("/v1/models")).status == 401


@pytest.mark.parametrize("accept, content_type, eof", [
    (None, TEXT_004, False),
    ("*/*", TEXT_004, False),
    ("text/plain", TEXT_004, False),
    ("text/plain;version=1.0.0", "text/plain; version=1.0.0; charset=utf-8; escaping=underscores", False),
    ("application/openmetrics-text;version=1.0.0",
     "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores", True),
], ids=["no-accept", "any", "text-plain", "text-1.0.0", "openmetrics"])
async def test_metrics_content_type_follows_accept(accept, content_type, eof):
    """As vLLM's /metrics and the scheduler's (prometheus_client's own handler): the classic text format 0.0.4 unless
    the scraper asks for another; the gateway answered 'version=1.0.0' to every scraper."""
    headers = {"Accept": accept} if accept is not None else {}
    async with fake_gateway(FakeServing(TOKENIZER)) as (client, _):
        response = await client.get("/metrics", headers=headers)
        body = await response.read()
        assert response.status == 200 and response.headers["Content-Type"] == content_type
        assert b"sparkinfer_gateway_http_requests_total" in body and b"_created" not in body
        assert body.endswith(b"# EOF\n") == eof


@pytest.mark.parametrize("served, expected", [
    (None, "sparkinfer"),
    ("my-model", "sparkinfer"),
    ("Qwen/Qwen3.8-27B-NVFP4", "Qwen"),
], ids=["checkpoint-id", "plain-alias", "org-alias"])
async def test_lmstudio_publisher_is_the_org_of_the_served_id(served, expected):
    """/api/v0/models shows the served name as `id`; its publisher is that id's org, not the checkpoint folder's."""
    async with fake_gateway(FakeServing(TOKENIZER), served_model_name=served) as (client, _):
        listed = (await (await client.get("/api/v0/models")).json())["data"][0]
        assert listed["publisher"] == expected and listed["id"] == (served or "fake-model")
        one = await client.get(f"/api/v0/models/{listed['id']}")
        assert one.status == 200 and (await one.json())["publisher"] == expected


@pytest.mark.parametrize("served", [None, "my-model"], ids=["checkpoint-id", "served-name"])
async def test_health_names_the_model_as_the_models_list_does(served):
    """/health's model is the id /v1/models lists: the served name when SPARKINFER_SERVED_MODEL_NAME is set (it gave
    the checkpoint id, so a probe comparing the two saw a different model)."""
    async with fake_gateway(FakeServing(TOKENIZER), served_model_name=served) as (client, _):
        listed = (await (await client.get("/v1/models")).json())["data"][0]["id"]
        health = await (await client.get("/health")).json()
        assert listed == (served or "fake-model")
        assert health["status"] == "ok" and health["model"] == listed


@pytest.mark.parametrize("served", [None, "my-model"], ids=["checkpoint-id", "served-name"])
async def test_models_root_is_the_checkpoint_behind_the_served_name(served):
    """As vLLM's ModelCard (id: --served-model-name, root: the model path it serves): root was the served name too,
    so a client reading root to find the checkpoint (its tokenizer) got the alias."""
    async with fake_gateway(FakeServing(TOKENIZER), served_model_name=served) as (client, _):
        listed = (await (await client.get("/v1/models")).json())["data"][0]
        one = await (await client.get(f"/v1/models/{listed['id']}")).json()
        assert listed == one
        assert listed["id"] == (served or "fake-model") and listed["root"] == "fake-model"


async def test_sglangs_health_generate_answers_as_health():
    """SGLang serves /health_generate with its /health handler (200 while the server can generate, else 503), and its
    key check lets /health* through; SGLang deployments probe it (Kubernetes liveness, routers). It was a 404 here."""
    fake = FakeServing(TOKENIZER)
    async with fake_gateway(fake, api_key="s3cret") as (client, _):
        up = await client.get("/health_generate")
        assert (up.status, (await up.json())["status"]) == (200, "ok")
        fake.worker_alive = False
        down = await client.get("/health_generate")
        assert (down.status, (await down.json())["reason"]) == (503, "worker_down")


async def test_the_names_readme_lists_answer_under_a_served_name():
    """README's Model names: with SPARKINFER_SERVED_MODEL_NAME set, that name, the checkpoint's own id and `default`
    answer (each also with `:latest`), and any other name is the 404 (which README did not say of the checkpoint id)."""
    async with fake_gateway(FakeServing(TOKENIZER), served_model_name="my-model") as (client, _):
        names = ["my-model", "fake-model", "default", "my-model:latest", "fake-model:latest", "default:latest", "other"]
        statuses = {}
        for name in names:
            response = await client.post("/v1/chat/completions", json={
                "model": name, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1})
            body = await response.json()
            statuses[name] = (response.status, body.get("model") or body["error"]["code"])
    assert statuses == {**{name: (200, "my-model") for name in names[:-1]}, "other": (404, "model_not_found")}


async def test_readme_gives_the_probe_bodies_as_served():
    """README's row of /health, /version: it gave /health's 200 as {"status":"ok"} alone (it also has the served
    model and the scheduler's running and waiting requests) and /version's body not at all."""
    import os
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md"), encoding="utf-8").read()
    row = next(line for line in readme.splitlines() if line.startswith("| `GET /health`"))
    async with fake_gateway(FakeServing(TOKENIZER)) as (client, _):
        health = await (await client.get("/health")).json()
        version = await (await client.get("/version")).json()
    assert f'200 `{{"status": "ok", {", ".join(f"{key!r}" for key in list(health)[1:])}}}`'.replace("'", '"') in row
    assert f'`{{{", ".join(f"{key!r}" for key in version)}}}`'.replace("'", '"') in row
