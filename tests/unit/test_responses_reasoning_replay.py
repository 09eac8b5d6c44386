"""/v1/responses reasoning kept across a stateless tool loop (fake scheduler): with include
["reasoning.encrypted_content"] a reasoning item carries its text in encrypted_content, and a reasoning item sent back
without its reasoning_text (as Codex sends it, content null) is replayed into the prompt from there."""
import orjson
import pytest

from gateway.fake_scheduler import build_tokenizer

TOKENIZER = build_tokenizer()
INCLUDE = {"include": ["reasoning.encrypted_content"]}
TOOLS = [{"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]
USER = {"role": "user", "content": "List the files."}
CALL = {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": '{"cmd": "ls"}'}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"}
REPLY = "<think>I should run ls first</think>" + ("<tool_call>\n<function=shell>\n<parameter=cmd>\nls\n</parameter>\n"
                                                  "</function>\n</tool_call>")


async def post(client, body: dict) -> tuple[int, dict]:
    response = await client.post("/v1/responses", data=orjson.dumps({"model": "fake-model", "tools": TOOLS, **body}))
    return response.status, orjson.loads(await response.read())


def prompt_of(fake) -> str:
    return TOKENIZER.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


async def step_one(client, fake, stream: bool = False) -> dict:
    """The reasoning item of the first step of a tool loop, as the client receives it."""
    fake.script.reply = REPLY
    if not stream:
        status, body = await post(client, {"input": [USER], **INCLUDE})
        assert status == 200, body
        return body["output"][0]
    response = await client.post("/v1/responses", data=orjson.dumps(
        {"model": "fake-model", "tools": TOOLS, "input": [USER], "stream": True, **INCLUDE}))
    frames = [orjson.loads(frame.split("data: ", 1)[1]) for frame in (await response.read()).decode().split("\n\n")
              if frame.strip()]
    done = [frame["item"] for frame in frames if frame["type"] == "response.output_item.done"]
    assert frames[-1]["response"]["output"][0] == done[0]
    return done[0]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_reasoning_item_sent_back_without_its_text_is_replayed(stack, stream):
    client, fake = stack
    item = await step_one(client, fake, stream)
    assert item["type"] == "reasoning" and item["content"] == [{"type": "reasoning_text",
                                                                "text": "I should run ls first"}]
    blob = item["encrypted_content"]
    assert isinstance(blob, str) and "I should run ls first" not in blob
    await post(client, {"input": [USER, item, CALL, OUTPUT]})
    replayed = prompt_of(fake)
    assert "<think>\nI should run ls first\n</think>" in replayed
    # As Codex sends it back: the reasoning_text left out, the summary and encrypted_content kept.
    await post(client, {"input": [USER, {**item, "content": None}, CALL, OUTPUT]})
    assert prompt_of(fake) == replayed


async def test_without_include_there_is_no_encrypted_content(stack):
    client, fake = stack
    fake.script.reply = REPLY
    status, body = await post(client, {"input": [USER]})
    assert status == 200 and body["output"][0]["type"] == "reasoning"
    assert body["output"][0]["encrypted_content"] is None


async def test_another_servers_blob_is_not_read_as_reasoning(stack):
    """OpenAI's encrypted reasoning means nothing here: the item's summary is read, as before."""
    client, fake = stack
    item = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Summary."}],
            "encrypted_content": "gAAAAABpZtK3mH8xYz2kL9nP4qR7sT0uW"}
    status, _ = await post(client, {"input": [USER, item, CALL, OUTPUT]})
    assert status == 200 and "<think>\nSummary.\n</think>" in prompt_of(fake) and "gAAAA" not in prompt_of(fake)


async def test_a_damaged_blob_of_ours_is_a_400(stack):
    client, fake = stack
    item = await step_one(client, fake)
    damaged = {**item, "content": None, "encrypted_content": item["encrypted_content"][:-3] + "!"}
    status, body = await post(client, {"input": [USER, damaged, CALL, OUTPUT]})
    assert status == 400 and body["error"]["param"] == "input[1].encrypted_content", body
