"""An output that ends inside a character (max_tokens cut an emoji after its first byte tokens, or the model ended
there) is sent without that character, not with a trailing U+FFFD, on every route, streamed or not: vLLM's
DecodeStream never emits a text ending in U+FFFD and Ollama's runner trims the bytes (flushPending) (fake
scheduler; its byte-level tokenizer splits the emoji over four tokens)."""
import json

import pytest

USER = [{"role": "user", "content": "hi"}]
REPLY = "Hi 😀 there"
NUM_KEPT = 5   # "H", "i", " " and two of the emoji's four byte tokens


def _bodies(num: int) -> dict:
    """route -> a body generating `num` tokens at most, its thinking off."""
    return {
        "/v1/chat/completions": {"messages": USER, "max_tokens": num, "enable_thinking": False},
        "/v1/completions": {"prompt": "hi", "max_tokens": num},
        "/v1/responses": {"input": "hi", "max_output_tokens": num, "reasoning": {"effort": "none"}},
        "/v1/messages": {"messages": USER, "max_tokens": num, "thinking": {"type": "disabled"}},
        "/api/chat": {"messages": USER, "think": False, "options": {"num_predict": num}},
        "/api/generate": {"prompt": "hi", "think": False, "options": {"num_predict": num}},
        "/completion": {"prompt": "hi", "n_predict": num},
        "/api/v0/chat/completions": {"messages": USER, "max_tokens": num,
                                     "chat_template_kwargs": {"enable_thinking": False}},
    }


def _whole_text(route: str, body: dict) -> str:
    if route in ("/v1/chat/completions", "/api/v0/chat/completions"):
        return body["choices"][0]["message"]["content"]
    if route == "/v1/completions":
        return body["choices"][0]["text"]
    if route == "/v1/responses":
        return "".join(part["text"] for item in body["output"] if item["type"] == "message" for part in item["content"])
    if route == "/v1/messages":
        return "".join(block.get("text", "") for block in body["content"])
    if route == "/api/chat":
        return body["message"]["content"]
    return body["response"] if route == "/api/generate" else body["content"]


def _event_text(route: str, event: dict) -> str:
    if route in ("/v1/chat/completions", "/api/v0/chat/completions"):
        return "".join(choice["delta"].get("content") or "" for choice in event["choices"])
    if route == "/v1/completions":
        return "".join(choice["text"] for choice in event["choices"])
    if route == "/v1/responses":
        return event["delta"] if event["type"] == "response.output_text.delta" else ""
    if route == "/v1/messages":
        return event["delta"].get("text", "") if event["type"] == "content_block_delta" else ""
    if route == "/api/chat":
        return event["message"]["content"]
    return event.get("response", "") if route == "/api/generate" else event.get("content", "")


async def _text(client, route: str, body: dict, stream: bool) -> str:
    response = await client.post(route, json={"model": "fake-model", **body, "stream": stream})
    assert response.status == 200, await response.text()
    if not stream:
        return _whole_text(route, await response.json())
    text = ""
    for line in (await response.text()).splitlines():
        line = line[6:] if line.startswith("data: ") else line
        if line.startswith("{"):
            text += _event_text(route, json.loads(line))
    return text


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("route", list(_bodies(1)))
async def test_a_cut_character_is_left_out(stack, route, stream):
    test_client, _ = stack
    # Before: "Hi \ufffd" on every route.
    assert await _text(test_client, route, _bodies(NUM_KEPT)[route], stream) == "Hi "


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("route", ["/v1/chat/completions", "/api/chat", "/completion"])
async def test_a_character_the_model_ended_inside_is_left_out(stack, route, stream):
    test_client, fake = stack
    fake.script.token_ids = fake.tokenizer.encode(REPLY).ids[:NUM_KEPT]   # then the eos
    assert await _text(test_client, route, _bodies(64)[route], stream) == "Hi "


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_invalid_bytes_at_the_end_stay_replacement_characters(stack, stream):
    # A lone continuation byte is no character's beginning: it reads U+FFFD, as before.
    test_client, fake = stack
    ids = fake.tokenizer.encode(REPLY).ids
    fake.script.token_ids = ids[:3] + [ids[4]]
    assert await _text(test_client, "/v1/chat/completions", _bodies(64)["/v1/chat/completions"], stream) == "Hi \ufffd"
