"""The KoboldAI routes' errors in KoboldCpp's own shape, {"detail": {"msg", "type"}} (LostRuins/koboldcpp
koboldcpp.py: its 401 "unauthorized", 503 "service_unavailable" and bad-input answers all write {"detail": {"msg",
"type"}}), which KoboldAI clients read: SillyTavern's KoboldAI source shows `errorJson?.detail?.msg`
(SillyTavern src/endpoints/backends/kobold.js, its /generate handler) and otherwise the whole body as the message.
/api/v1/generate answered LM Studio's OpenAI-shaped {"error": {...}} and /api/extra/* Ollama's {"error": "..."}."""
import orjson
import pytest


@pytest.mark.parametrize("path, body", [
    ("/api/v1/generate", {"prompt": 5}),
    ("/api/v1/generate", {"prompt": "hi", "max_length": "x"}),
    ("/api/v1/generate", [1]),
    ("/api/extra/generate/stream", {"prompt": 5}),
    ("/api/extra/generate/check", [1]),
    ("/api/extra/tokencount", {}),
    ("/api/extra/detokenize", {"ids": "x"}),
], ids=["prompt", "max_length", "not-object", "stream", "check", "tokencount", "detokenize"])
async def test_a_bad_body_is_koboldcpp_s_error(stack, path, body):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps(body))
    answer = await response.json()
    assert response.status == 400, answer
    assert set(answer) == {"detail"} and answer["detail"]["type"] == "bad_input", answer
    assert isinstance(answer["detail"]["msg"], str) and answer["detail"]["msg"]
    assert fake.script.requests == []


async def test_invalid_json_is_koboldcpp_s_error(stack):
    client, _ = stack
    response = await client.post("/api/v1/generate", data=b"{not json")
    answer = await response.json()
    assert response.status == 400 and answer["detail"]["type"] == "bad_input" and "JSON" in answer["detail"]["msg"]


@pytest.mark.parametrize("path", ["/api/v1/chat", "/api/v1/models/x"])
async def test_lm_studio_s_v1_routes_keep_their_shape(stack, path):
    """LM Studio's /api/v1 routes beside the KoboldAI ones keep LM Studio's error object."""
    client, _ = stack
    response = await client.post(path, data=b"[1]")
    answer = await response.json()
    assert response.status >= 400 and "error" in answer and "detail" not in answer, answer


async def test_ollama_routes_keep_their_shape(stack):
    client, _ = stack
    response = await client.post("/api/generate", data=b"[1]")
    answer = await response.json()
    assert response.status == 400 and isinstance(answer["error"], str)
