"""llama.cpp's LoRA surface on a server that loads no adapter: a request's `lora` naming one is llama.cpp's 400
"invalid adapter id" (it was logged as an unknown field and the base model answered, as if the adapter had been
applied), GET /lora-adapters lists none and POST /lora-adapters takes only the empty list, and POST /slots/{id}
(save / restore / erase) is llama.cpp's 501 of a server without --slot-save-path; those routes were 404s in OpenAI's
error shape."""
import pytest

USER = [{"role": "user", "content": "hi"}]
NO_ADAPTER = "lora: invalid adapter id: this server loads no LoRA adapters (GET /lora-adapters lists none)"


@pytest.mark.parametrize("path, body", [
    ("/completion", {"prompt": "hi", "n_predict": 2}),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 2}),
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 2}),
    ("/api/v0/chat/completions", {"messages": USER, "max_tokens": 2}),
])
async def test_a_lora_adapter_that_is_not_loaded_is_a_400(stack, path, body):
    client, fake = stack
    response = await client.post(path, json={**body, "lora": [{"id": 0, "scale": 0.5}]})
    error = (await response.json())["error"]
    assert response.status == 400 and (error["message"], error["param"]) == (NO_ADAPTER, "lora")
    assert error["code"] == (400 if path == "/completion" else "unsupported")
    assert not fake.script.requests
    # No adapter asked for: the empty list, as llama.cpp's clients send it, is served.
    assert (await client.post(path, json={**body, "lora": []})).status == 200


async def test_lora_must_be_a_list(stack):
    client, _ = stack
    response = await client.post("/completion", json={"prompt": "hi", "lora": {"id": 0}})
    assert response.status == 400 and (await response.json())["error"]["param"] == "lora"


async def test_the_adapter_list_is_empty_and_only_the_empty_list_is_set(stack):
    client, _ = stack
    response = await client.get("/lora-adapters")
    assert (response.status, await response.json()) == (200, [])
    response = await client.post("/lora-adapters", json=[])
    assert (response.status, await response.json()) == (200, {"success": True})
    response = await client.post("/lora-adapters", json=[{"id": 0, "scale": 0.2}])
    assert (response.status, await response.json()) == (400, {"error": {
        "code": 400, "message": "invalid adapter id: this server loads no LoRA adapters",
        "type": "invalid_request_error"}})
    response = await client.post("/lora-adapters", json={"id": 0})
    assert (await response.json())["error"]["message"] == "Request body must be an array"


@pytest.mark.parametrize("action", ["save", "restore", "erase"])
async def test_slot_actions_are_llama_cpps_501(stack, action):
    client, _ = stack
    response = await client.post(f"/slots/0?action={action}", json={"filename": "slot.bin"})
    assert response.status == 501
    assert (await response.json())["error"] == {
        "code": 501, "type": "not_supported_error", "message": "This server does not support slots action. It keeps "
        "no per-slot prompt cache to save, restore or erase (its prefix cache is automatic)"}
