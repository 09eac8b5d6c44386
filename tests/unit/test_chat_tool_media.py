"""/v1/chat/completions over the fake scheduler: an image, audio or file part in a `tool` message (Codex CLI's chat
wire sends view_image's output so, `{"type": "image_url"}` in the tool message's content, codex-rs
core/src/chat_completions.rs) is a line saying it was left out, as /v1/responses and /v1/messages read one in a tool
result: the tool message is replayed in every later request, and its 400 failed each one (ggml-org/llama.cpp#23890).
In a user message such a part stays the 400."""
import orjson
import pytest

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
FILE = {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"}}
TOOLS = [{"type": "function", "function": {"name": "view_image", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "view_image", "arguments": '{"path": "a.png"}'}}]}


def conversation(content) -> list:
    return [{"role": "user", "content": "What is in a.png?"}, CALL,
            {"role": "tool", "tool_call_id": "call_1", "content": content}]


def prompt_of(fake) -> str:
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


async def post(client, messages: list) -> tuple[int, dict]:
    response = await client.post("/v1/chat/completions", data=orjson.dumps(
        {"model": "fake-model", "messages": messages, "tools": TOOLS, "max_tokens": 16,
         "chat_template_kwargs": {"enable_thinking": False}}))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("content, result", [
    ([IMAGE], "[image_url left out: this model reads text only]"),
    ([{"type": "text", "text": "Viewed a.png"}, IMAGE, {"type": "text", "text": "(1 image)"}],
     "Viewed a.png\n[image_url left out: this model reads text only]\n(1 image)"),
    ([AUDIO], "[input_audio left out: this model reads text only]"),
    ([FILE, {"type": "text", "text": "done"}], "[file left out: this model reads text only]\ndone"),
], ids=["image", "between texts", "audio", "file"])
async def test_media_in_a_tool_message_is_a_line_saying_it_was_left_out(stack, content, result):
    client, fake = stack
    status, body = await post(client, conversation(content))
    assert status == 200 and body["choices"][0]["message"]["content"] == "Hello world", body
    assert f"<tool_response>\n{result}\n</tool_response>" in prompt_of(fake)


async def test_an_image_in_a_user_message_is_still_refused(stack):
    client, fake = stack
    status, body = await post(client, [{"role": "user", "content": [{"type": "text", "text": "Look"}, IMAGE]}])
    assert status == 400 and body["error"]["param"] == "messages[0].content[1].type", body
    assert body["error"]["message"] == "messages[0].content[1]: only text parts are supported (got type 'image_url')"
    assert fake.script.requests == []
