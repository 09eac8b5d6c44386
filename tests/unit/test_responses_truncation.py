"""/v1/responses `truncation: "auto"` over the fake scheduler (context 2048): a conversation past the context is served
with its oldest input items left out, as OpenAI drops items from the beginning of the conversation; the instructions
and the newest items are kept. With truncation "disabled" (the default) it stays the 400."""
import orjson
import pytest

from gateway.fake_scheduler import build_tokenizer

TOKENIZER = build_tokenizer()
NO_THINK = {"reasoning": {"effort": "none"}}
CALL = {"type": "function_call", "name": "get_weather", "arguments": '{"city": "Paris"}'}
TOOLS = [{"type": "function", "name": "get_weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]


def turns(num_turns: int, words: int) -> list:
    """User and assistant turns, each "turn <i>:" and `words` words (a word is one token of the fake tokenizer)."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + "word " * words}
            for i in range(num_turns)]


# 10 turns of ~300 tokens each: about 3000 tokens with the markup, past the context of 2048.
LONG = {"model": "fake-model", "instructions": "Be brief.", "max_output_tokens": 16, **NO_THINK,
        "input": turns(10, 300) + [{"role": "user", "content": "What now?"}]}


async def post(client, path: str, body: dict) -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


def prompt_of(fake) -> str:
    return TOKENIZER.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


async def test_auto_leaves_the_oldest_items_out(stack):
    client, fake = stack
    status, body = await post(client, "/v1/responses", {**LONG, "truncation": "auto"})
    assert status == 200, body
    prompt = prompt_of(fake)
    num_prompt = len(fake.script.requests[-1].prompt_token_ids)
    assert prompt.startswith("<|im_start|>system\nBe brief.<|im_end|>\n")
    assert "turn 0:" not in prompt and "turn 9:" in prompt and "What now?<|im_end|>" in prompt
    # The newest turns that fit with the 16 output tokens asked for: one more would not have.
    kept = [i for i in range(10) if f"turn {i}:" in prompt]
    assert kept == list(range(kept[0], 10)) and num_prompt + 16 <= 2048 < num_prompt + 16 + 300
    assert body["status"] == "completed" and body["truncation"] == "auto"
    assert body["usage"]["input_tokens"] == num_prompt
    status, counted = await post(client, "/v1/responses/input_tokens", {**LONG, "truncation": "auto"})
    assert status == 200 and counted["input_tokens"] == num_prompt


async def test_auto_streams_the_same_prompt(stack):
    client, fake = stack
    await post(client, "/v1/responses", {**LONG, "truncation": "auto"})
    whole = list(fake.script.requests[-1].prompt_token_ids)
    response = await client.post("/v1/responses", data=orjson.dumps({**LONG, "truncation": "auto", "stream": True}))
    assert response.status == 200
    frames = (await response.read()).decode().strip().split("\n\n")
    assert frames[-1].startswith("event: response.completed")
    completed = orjson.loads(frames[-1].split("data: ", 1)[1])["response"]
    assert list(fake.script.requests[-1].prompt_token_ids) == whole
    assert completed["usage"]["input_tokens"] == len(whole)


@pytest.mark.parametrize("truncation", [None, "disabled"])
async def test_disabled_is_the_400(stack, truncation):
    client, _ = stack
    status, body = await post(client, "/v1/responses", {**LONG, "truncation": truncation})
    assert status == 400 and body["error"]["code"] == "context_length_exceeded" and body["error"]["param"] == "input"


async def test_a_prompt_that_fits_is_kept_whole(stack):
    client, fake = stack
    body = {**LONG, "input": turns(3, 20), "truncation": "auto"}
    status, _ = await post(client, "/v1/responses", body)
    whole = prompt_of(fake)
    assert status == 200 and all(f"turn {i}:" in whole for i in range(3))
    await post(client, "/v1/responses", {**body, "truncation": "disabled"})
    assert prompt_of(fake) == whole


async def test_the_last_item_alone_past_the_context_is_still_the_400(stack):
    client, _ = stack
    body = {**LONG, "input": turns(2, 50) + [{"role": "user", "content": "word " * 3000}], "truncation": "auto"}
    status, error = await post(client, "/v1/responses", body)
    assert status == 400 and error["error"]["code"] == "context_length_exceeded"


async def test_a_call_output_is_not_kept_without_its_call(stack):
    """When the cut falls between a function_call and its output, the output goes too: the kept conversation does not
    begin with a tool response to a call the model never sees."""
    client, fake = stack
    items = [{"role": "user", "content": "Weather?"}, {**CALL, "call_id": "c1"}, {**CALL, "call_id": "c2"},
             {"type": "function_call_output", "call_id": "c1", "output": "first " + "word " * 1990},
             {"type": "function_call_output", "call_id": "c2", "output": "second result"},
             {"role": "user", "content": "And now?"}]
    status, body = await post(client, "/v1/responses", {**LONG, "input": items, "tools": TOOLS, "truncation": "auto"})
    assert status == 200, body
    prompt = prompt_of(fake)
    assert "second result" not in prompt and "<tool_response>" not in prompt and "And now?" in prompt
