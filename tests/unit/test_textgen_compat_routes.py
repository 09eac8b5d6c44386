"""The model and tokenizer routes of TabbyAPI (/v1/model/list, /v1/model, /v1/token/encode, /v1/token/decode),
text-generation-webui (/v1/internal/model/info, /model/list, /encode, /decode, /token-count) and KoboldCpp
(/api/extra/tokencount), as SillyTavern calls them (src/endpoints/backends/text-completions.js /status,
src/endpoints/tokenizers.js /remote/textgenerationwebui/encode). Each was a 404: SillyTavern's TabbyAPI source reads
the model list at /v1/model/list and answered "Models endpoint is offline" (it never connected); the tokenizer
routes' 404 made it count tokens with a guessed tokenizer."""
import orjson
import pytest

TEXT = "Hello world, the quick brown fox"


async def _call(client, method: str, path: str, body=None) -> tuple[int, dict]:
    response = await client.request(method, path, data=None if body is None else orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def _ids(client, text: str) -> list:
    _, reference = await _call(client, "POST", "/v1/tokenize", {"prompt": text})
    return reference["tokens"]


async def test_sillytavern_tabby_status_reads_the_model(stack):
    """SillyTavern: data.data.map(x => x.id) from /v1/model/list, then /v1/model's id as the model name."""
    client, _ = stack
    status, listing = await _call(client, "GET", "/v1/model/list")
    assert status == 200, listing
    assert listing["object"] == "list" and [m["id"] for m in listing["data"]] == ["fake-model"]
    status, card = await _call(client, "GET", "/v1/model")
    assert status == 200 and card == listing["data"][0]
    assert card["owned_by"] == "tabbyAPI" and card["parameters"]["max_seq_len"] > 0


async def test_ooba_model_info_and_list(stack):
    client, _ = stack
    assert await _call(client, "GET", "/v1/internal/model/info") == \
        (200, {"model_name": "fake-model", "lora_names": [], "loader": "sparkinfer"})
    assert await _call(client, "GET", "/v1/internal/model/list") == (200, {"model_names": ["fake-model"]})


@pytest.mark.parametrize("path, body, key", [
    ("/v1/token/encode", {"text": TEXT}, "length"),
    ("/v1/internal/encode", {"text": TEXT}, "length"),
], ids=["tabby", "ooba"])
async def test_encode_gives_the_prompt_ids_and_their_count(stack, path, body, key):
    """SillyTavern reads data.length ?? data.count ?? data.value, and data.tokens ?? data.ids."""
    client, _ = stack
    ids = await _ids(client, TEXT)
    assert await _call(client, "POST", path, body) == (200, {"tokens": ids, key: len(ids)})


async def test_counts(stack):
    client, _ = stack
    ids = await _ids(client, TEXT)
    assert await _call(client, "POST", "/v1/internal/token-count", {"text": TEXT}) == (200, {"length": len(ids)})
    assert await _call(client, "POST", "/api/extra/tokencount", {"prompt": TEXT}) == \
        (200, {"value": len(ids), "ids": ids})


async def test_kobold_tokenize_alias_and_detokenize(stack):
    """KoboldCpp's /api/extra/tokenize is its tokencount's alias; /api/extra/detokenize takes {"ids"}."""
    client, _ = stack
    ids = await _ids(client, TEXT)
    assert await _call(client, "POST", "/api/extra/tokenize", {"prompt": TEXT}) == \
        (200, {"value": len(ids), "ids": ids})
    assert await _call(client, "POST", "/api/extra/detokenize", {"ids": ids}) == \
        (200, {"result": TEXT, "success": True})


@pytest.mark.parametrize("path", ["/v1/token/decode", "/v1/internal/decode"], ids=["tabby", "ooba"])
async def test_decode_gives_the_text_back(stack, path):
    client, _ = stack
    assert await _call(client, "POST", path, {"tokens": await _ids(client, TEXT)}) == (200, {"text": TEXT})


@pytest.mark.parametrize("path, body", [("/v1/token/encode", {"txt": TEXT}), ("/v1/internal/decode", {"tokens": "x"}),
                                        ("/api/extra/tokencount", {})], ids=["tabby", "ooba", "kobold"])
async def test_a_malformed_body_is_a_400(stack, path, body):
    client, _ = stack
    status, answer = await _call(client, "POST", path, body)
    # KoboldCpp's error shape on its route (koboldcpp.py {"detail": {"msg", "type"}}), OpenAI's on the others.
    assert status == 400 and (answer["detail"]["msg"] if path.startswith("/api/extra/") else answer["error"])


CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <|im_end|> there"},
        {"role": "assistant", "content": "Hello!", "reasoning_content": "greet"}]


@pytest.mark.parametrize("template_vars", [None, {"enable_thinking": False}], ids=["plain", "template-vars"])
async def test_tabby_encode_renders_chat_messages(stack, template_vars):
    """TabbyAPI's /v1/token/encode takes chat messages as its text: the prompt template's rendering of them without
    the generation prompt (template_vars its variables), as its encode_tokens does (endpoints/core/router.py). A list
    was a 400 'is not of type string'."""
    client, _ = stack
    body = {"text": CHAT, **({"template_vars": template_vars} if template_vars else {})}
    status, answer = await _call(client, "POST", "/v1/token/encode", body)
    assert status == 200, answer
    _, reference = await _call(client, "POST", "/v1/tokenize", {
        "messages": CHAT, "add_generation_prompt": False, "chat_template_kwargs": template_vars or {}})
    assert answer == {"tokens": reference["tokens"], "length": len(reference["tokens"])}
    _, text = await _call(client, "POST", "/v1/detokenize", {"tokens": answer["tokens"]})
    assert text["prompt"].endswith("<|im_start|>assistant\n<think>\ngreet\n</think>\n\nHello!<|im_end|>\n")
