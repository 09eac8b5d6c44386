"""POST /v1/responses/input_tokens over the fake scheduler (context 2048): OpenAI's count of a Responses body is the
prompt /v1/responses renders, to the token, also past the context (clients ask to learn that it no longer fits)."""
import orjson

TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]
BODY = {"model": "fake-model", "instructions": "Be brief.", "input": "Hi", "tools": TOOLS,
        "reasoning": {"effort": "none"}}


async def post(client, path: str, body: dict) -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def test_count_is_the_prompt_of_create(stack):
    client, fake = stack
    status, counted = await post(client, "/v1/responses/input_tokens", {**BODY, "max_output_tokens": 100000})
    assert status == 200, counted
    status, created = await post(client, "/v1/responses", {**BODY, "max_output_tokens": 8})
    assert status == 200, created
    num_prompt = len(fake.script.requests[-1].prompt_token_ids)
    assert counted == {"object": "response.input_tokens", "input_tokens": num_prompt}
    assert created["usage"]["input_tokens"] == num_prompt


async def test_past_the_context_is_counted(stack):
    client, _ = stack
    # "word " is one token of the fake tokenizer: 3000 of them are past the context.
    body = {**BODY, "input": "word " * 3000}
    status, error = await post(client, "/v1/responses", body)
    assert status == 400 and error["error"]["code"] == "context_length_exceeded"
    status, counted = await post(client, "/v1/responses/input_tokens", body)
    assert status == 200 and counted["input_tokens"] > 3000, counted
    assert f"your request has {counted['input_tokens']} input tokens" in error["error"]["message"]


async def test_bad_bodies_are_the_create_errors(stack):
    client, _ = stack
    status, error = await post(client, "/v1/responses/input_tokens", {**BODY, "model": "gpt-4"})
    assert status == 404 and error["error"]["code"] == "model_not_found"
    status, error = await post(client, "/v1/responses/input_tokens", {**BODY, "previous_response_id": "resp_1"})
    assert status == 400 and error["error"]["code"] == "previous_response_not_found"
