"""/v1/responses (fake scheduler): Codex's agent_message input items (multi-agent: the task handed to a spawned
sub-agent, a sub-agent's report) are user turns, as Ollama (ollama#18286, PR #18329) and NVIDIA Dynamo read them.
They were the 400 "items of type 'agent_message' are not supported", and since Codex replays them in every later
request of the thread, the thread could not go on once a sub-agent had run."""
import pytest

TASK = "Message Type: NEW_TASK\nList the files."
USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Relay the task below."}]}
PARTS = [{"type": "input_text", "text": TASK}]


def agent_message(content) -> dict:
    return {"type": "agent_message", "id": "amsg_0000", "author": "/root", "recipient": "/root/child",
            "content": content}


def prompt_of(fake) -> str:
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


@pytest.mark.parametrize("content", [PARTS, TASK], ids=["parts", "string"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_agent_message_is_a_user_turn(stack, content, stream):
    client, fake = stack
    fake.script.reply = "Done."
    body = {"model": "fake-model", "input": [USER, agent_message(content)], "stream": stream}
    response = await client.post("/v1/responses", json=body)
    assert response.status == 200, await response.text()
    await response.read()
    rendered = prompt_of(fake)
    plain = {"model": "fake-model", "input": [USER, {"role": "user", "content": TASK}]}
    assert (await client.post("/v1/responses", json=plain)).status == 200
    assert rendered == prompt_of(fake)
    assert "<|im_start|>user\nMessage Type: NEW_TASK\nList the files.<|im_end|>\n<|im_start|>assistant\n" in rendered
    counted = await (await client.post("/v1/responses/input_tokens", json=body)).json()
    assert counted["input_tokens"] == len(fake.script.requests[-1].prompt_token_ids)


async def test_a_sub_agent_thread_replayed_with_its_calls_renders_in_order(stack):
    """The spawned agent's thread as Codex resends it: its task, its call and output, its answer, a new task."""
    client, fake = stack
    call = {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"cmd\": \"ls\"}"}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a.txt"}]}
    body = {"model": "fake-model", "input": [agent_message(PARTS), call, output, answer,
                                             agent_message([{"type": "input_text", "text": "Now count them."}])]}
    response = await client.post("/v1/responses", json=body)
    assert response.status == 200, await response.text()
    rendered = prompt_of(fake)
    assert rendered.index("List the files.") < rendered.index("a.txt\n</tool_response>") < rendered.index(
        "Now count them.<|im_end|>")


@pytest.mark.parametrize("content, param", [([{"type": "input_image", "image_url": "x"}], "input[1].content[0].type"),
                                            (5, "input[1].content")], ids=["image part", "number"])
async def test_an_agent_message_of_no_text_is_a_400(stack, content, param):
    client, _ = stack
    body = {"model": "fake-model", "input": [USER, agent_message(content)]}
    response = await client.post("/v1/responses", json=body)
    assert response.status == 400 and (await response.json())["error"]["param"] == param


async def test_the_payload_in_an_encrypted_content_part_is_read_in_order(stack):
    """Codex multi-agent v2 sends the task's envelope as input_text and its payload in an encrypted_content part, in
    plaintext to a provider that cannot decrypt it (Ollama PR #18298, Dynamo frontend-crates PR #176 read it so);
    it was the 400 "input[1].content[1].type must be one of input_text, output_text, text"."""
    client, fake = stack
    envelope = "Message Type: NEW_TASK\nTask name: /root/child\nSender: /root\nPayload:"
    content = [{"type": "input_text", "text": envelope}, {"type": "encrypted_content", "encrypted_content": "List it."}]
    body = {"model": "fake-model", "input": [USER, agent_message(content)]}
    response = await client.post("/v1/responses", json=body)
    assert response.status == 200, await response.text()
    assert f"<|im_start|>user\n{envelope}\nList it.<|im_end|>\n<|im_start|>assistant\n" in prompt_of(fake)
    bad = agent_message([{"type": "encrypted_content", "encrypted_content": 5}])
    response = await client.post("/v1/responses", json={"model": "fake-model", "input": [USER, bad]})
    assert response.status == 400
    assert (await response.json())["error"]["param"] == "input[1].content[0].encrypted_content"


async def test_an_agent_reasoning_item_is_left_out(stack):
    """Codex replays its multi-agent agent_reasoning items (another agent's thinking, encrypted_content opaque) with
    the agent_message items (envoyproxy/ai-gateway#2442); they were the 400 "items of type 'agent_reasoning' are not
    supported", which ended the thread. The prompt is the one without them."""
    client, fake = stack
    reasoning = {"type": "agent_reasoning", "id": "ar_0000", "encrypted_content": "opaque"}
    body = {"model": "fake-model", "input": [USER, agent_message(PARTS), reasoning]}
    response = await client.post("/v1/responses", json=body)
    assert response.status == 200, await response.text()
    rendered = prompt_of(fake)
    without = {"model": "fake-model", "input": [USER, agent_message(PARTS)]}
    assert (await client.post("/v1/responses", json=without)).status == 200
    assert rendered == prompt_of(fake) and "opaque" not in rendered
