"""/v1/responses over the fake scheduler: an image or file part in a function_call_output (Codex's view_image, an MCP
screenshot) is a line saying it was left out, since the output is replayed in every later request and its 400 failed
each one (ggml-org/llama.cpp#23890: "Output of tool call should be 'Input text'"); in a message it stays the 400."""
import pytest

from tests.unit.test_responses_api import NO_THINK, post, prompt_of

IMAGE = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"}
FILE = {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"}
TOOLS = [{"type": "function", "name": "view_image", "parameters": {"type": "object",
                                                                    "properties": {"path": {"type": "string"}}}}]


def loop(output: list, kind: str = "function_call") -> list:
    call = {"type": kind, "call_id": "call_1", "name": "view_image",
            **({"input": "a.png"} if kind == "custom_tool_call" else {"arguments": '{"path": "a.png"}'})}
    return [{"role": "user", "content": "What is in a.png?"}, call,
            {"type": f"{kind}_output", "call_id": "call_1", "output": output}]


@pytest.mark.parametrize("output, response", [
    ([IMAGE], "[input_image left out: this model reads text only]"),
    ([{"type": "input_text", "text": "Viewed a.png"}, IMAGE, {"type": "input_text", "text": "(1 image)"}],
     "Viewed a.png\n[input_image left out: this model reads text only]\n(1 image)"),
    ([FILE], "[input_file left out: this model reads text only]"),
], ids=["image", "between texts", "file"])
@pytest.mark.parametrize("kind", ["function_call", "custom_tool_call"])
async def test_media_in_a_call_output_is_a_line_saying_it_was_left_out(stack, output, response, kind):
    client, fake = stack
    tools = TOOLS if kind == "function_call" else [{"type": "custom", "name": "view_image"}]
    status, body = await post(client, {"model": "fake-model", "input": loop(output, kind), "tools": tools,
                                       "max_output_tokens": 16, **NO_THINK})
    assert status == 200 and body["output"][0]["content"][0]["text"] == "Hello world", body
    assert f"<tool_response>\n{response}\n</tool_response>" in prompt_of(fake)


async def test_an_image_in_a_message_is_still_refused(stack):
    client, fake = stack
    status, body = await post(client, {"model": "fake-model", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Look"}, IMAGE]}]})
    assert status == 400 and body["error"]["param"] == "input[0].content[1].type", body
    assert "is an input_image: this model reads text only" in body["error"]["message"]
    assert fake.script.requests == []
