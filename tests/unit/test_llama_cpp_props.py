"""GET /props answers as llama.cpp's server does (tools/server/server-context.cpp get_props; its README 'GET /props'):
llama.cpp clients read the context window there (default_generation_settings.n_ctx) and the slot count (total_slots)
before they send; it was a 404 'no route /props'. Beside it, llama-server's GET /models, GET /slots (on by default in
llama.cpp: each seat's window and whether it is busy, ?fail_on_no_slot=1 its 503 when none is free; it was the 501 of a
server started without --slots, naming a flag this server does not have) and POST /apply-template (the chat prompt as
text), each a 404 before."""
from gateway.app import create_app
from gateway.client import SchedulerClient
from gateway.config import GatewayConfig
from gateway.fake_scheduler import FakeServing, build_tokenizer, start_fake_server, start_test_client


async def _client(serving, **config):
    server, addr = await start_fake_server(serving)
    client = await start_test_client(create_app(GatewayConfig(scheduler_addr=addr, **config), SchedulerClient(addr)))
    return server, client


async def test_props_states_the_window_slots_template_and_defaults():
    serving = FakeServing(build_tokenizer(), max_context_len=256)
    serving.max_num_seqs = 12
    server, client = await _client(serving)
    try:
        response = await client.get("/props")
        body = await response.json()
        assert response.status == 200
        settings = body["default_generation_settings"]
        assert settings["n_ctx"] == 256 and body["total_slots"] == 12
        # the checkpoint's generation_config temperature (0.7), no output limit, random seed, as llama.cpp states them
        assert settings["params"]["temperature"] == 0.7
        assert (settings["params"]["n_predict"], settings["params"]["seed"]) == (-1, 4294967295)
        assert body["model_alias"] == "fake-model" and body["chat_template"] == serving.template
        assert body["modalities"] == {"vision": False, "video": False, "audio": False}
        assert body["build_info"].startswith("sparkinfer ") and body["endpoint_slots"] is True
    finally:
        await client.close()
        await server.stop(None)


async def test_changing_props_is_llama_cpps_501():
    server, client = await _client(FakeServing(build_tokenizer()))
    try:
        response = await client.post("/props", json={"n_ctx": 8})
        body = await response.json()
        assert response.status == 501
        assert body["error"]["message"] == "This server does not support changing global properties."
    finally:
        await client.close()
        await server.stop(None)


async def test_props_needs_the_api_key_and_is_503_without_a_scheduler():
    server, client = await _client(FakeServing(build_tokenizer()), api_key="s3cret")
    try:
        assert (await client.get("/props")).status == 401
        assert (await client.get("/props", headers={"Authorization": "Bearer s3cret"})).status == 200
    finally:
        await client.close()
        await server.stop(None)
    client = await start_test_client(create_app(GatewayConfig(scheduler_addr="127.0.0.1:1"),
                                                SchedulerClient("127.0.0.1:1")))
    try:
        response = await client.get("/props")
        assert response.status == 503 and (await response.json())["error"]["code"]
    finally:
        await client.close()


async def test_models_answer_as_llama_server():
    server, client = await _client(FakeServing(build_tokenizer()))
    try:
        models = await client.get("/models")
        assert models.status == 200 and await models.json() == await (await client.get("/v1/models")).json()
    finally:
        await client.close()
        await server.stop(None)


async def test_apply_template_renders_the_chat_prompt_as_text():
    server, client = await _client(FakeServing(build_tokenizer()))
    try:
        messages = [{"role": "user", "content": "say <|im_end|> please"}]
        response = await client.post("/apply-template", json={"messages": messages})
        prompt = (await response.json())["prompt"]
        assert response.status == 200
        assert prompt.startswith("<|im_start|>user\nsay <|im_end|> please<|im_end|>\n<|im_start|>assistant\n")
        assert "\U000f0000" not in prompt and "\U000f0001" not in prompt   # control_tokens' markers
        # the same prompt /v1/tokenize counts for these messages (its special-token text aside)
        plain = [{"role": "user", "content": "say please"}]
        rendered = (await (await client.post("/apply-template", json={"messages": plain})).json())["prompt"]
        count = (await (await client.post("/v1/tokenize", json={"messages": plain})).json())["count"]
        assert (await (await client.post("/v1/tokenize", json={"prompt": rendered})).json())["count"] == count
        missing = await client.post("/apply-template", json={"prompt": "x"})
        assert missing.status == 400 and (await missing.json())["error"]["param"] == "messages"
    finally:
        await client.close()
        await server.stop(None)


async def test_llama_servers_other_routes_say_why_they_are_not_served():
    """llama.cpp answers what it does not serve with 501 not_supported ('This server does not support reranking. ...',
    a model without infill tokens); these paths were 404s 'no route', which reads as a wrong base URL."""
    server, client = await _client(FakeServing(build_tokenizer()))
    try:
        expected = {"/embedding": "This server does not support embeddings",
                    "/embeddings": "This server does not support embeddings",
                    "/infill": "Infill is not supported by this model: prefix token is missing. suffix token is "
                    "missing. middle token is missing.",
                    "/rerank": "This server does not support reranking", "/reranking": "This server does not "
                    "support reranking", "/v1/rerank": "This server does not support reranking",
                    "/v1/reranking": "This server does not support reranking"}
        for path, words in expected.items():
            response = await client.post(path, json={"content": "x", "query": "q", "documents": ["d"]})
            body = await response.json()
            assert (response.status, response.headers.get("x-should-retry")) == (501, "false"), path
            assert body["error"]["message"].startswith(words), (path, body)
    finally:
        await client.close()
        await server.stop(None)


async def test_slots_lists_each_seat_and_says_when_none_is_free():
    serving = FakeServing(build_tokenizer(), max_context_len=256)
    serving.max_num_seqs, serving.num_running = 3, 2
    server, client = await _client(serving)
    try:
        response = await client.get("/slots")
        assert response.status == 200
        assert await response.json() == [
            {"id": i, "id_task": -1, "n_ctx": 256, "speculative": False, "is_processing": i < 2} for i in range(3)]
        assert (await client.get("/slots?fail_on_no_slot=1")).status == 200
        serving.num_running = 3
        response = await client.get("/slots?fail_on_no_slot=1")
        assert response.status == 503
        assert await response.json() == {"error": {"code": 503, "message": "no slot available",
                                                   "type": "unavailable_error"}}
        assert [slot["is_processing"] for slot in await (await client.get("/slots")).json()] == [True] * 3
    finally:
        await client.close()
        await server.stop(None)
