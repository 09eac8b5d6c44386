"""/v1/responses previous_response_id (fake scheduler): a stored response's input and output items come before the new
input, as OpenAI and LM Studio's /v1/responses continue a response ("Stateful follow-up": input "Multiply it by 2"
with the earlier response's id); instructions are not carried over; store false keeps nothing. Before, every
previous_response_id was the 400 previous_response_not_found, so a client that sends only the new turn failed there."""
import orjson

from gateway.fake_scheduler import build_tokenizer

TOKENIZER = build_tokenizer()
TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather of a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
NO_THINK = {"reasoning": {"effort": "none"}}


async def post(client, body: dict, path: str = "/v1/responses") -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps({"model": "fake-model", **NO_THINK, **body}))
    return response.status, orjson.loads(await response.read())


def prompt_of(fake) -> str:
    return TOKENIZER.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


async def test_a_follow_up_sees_the_earlier_input_and_output_but_not_its_instructions(stack):
    client, fake = stack
    fake.script.reply = "Seven"
    status, first = await post(client, {"input": "Give a prime below 10.", "instructions": "Be brief."})
    assert status == 200 and first["store"] is True
    fake.script.reply = "Fourteen"
    status, second = await post(client, {"input": "Multiply it by 2", "previous_response_id": first["id"]})
    assert status == 200, second
    assert second["previous_response_id"] == first["id"] and second["output"][0]["content"][0]["text"] == "Fourteen"
    prompt = prompt_of(fake)
    assert prompt.index("Give a prime below 10.") < prompt.index("Seven") < prompt.index("Multiply it by 2")
    assert "Be brief." not in prompt
    # input_tokens counts the same continued input.
    status, counted = await post(client, {"input": "Multiply it by 2", "previous_response_id": first["id"]},
                                 "/v1/responses/input_tokens")
    assert status == 200 and counted["input_tokens"] == second["usage"]["input_tokens"]


async def test_a_tool_loop_sends_only_the_call_output(stack):
    client, fake = stack
    fake.script.reply = CALL
    _, first = await post(client, {"input": "Weather in Paris?", "tools": TOOLS})
    call = first["output"][-1]
    assert call["type"] == "function_call"
    fake.script.reply = "Sunny"
    status, second = await post(client, {"previous_response_id": first["id"], "tools": TOOLS, "input": [
        {"type": "function_call_output", "call_id": call["call_id"], "output": "22C, sunny"}]})
    assert status == 200, second
    prompt = prompt_of(fake)
    assert prompt.index("Weather in Paris?") < prompt.index("<function=get_weather>") < prompt.index("22C, sunny")


async def test_a_chain_of_responses_keeps_every_turn(stack):
    client, fake = stack
    previous = None
    for turn in ("one", "two", "three"):
        fake.script.reply = f"ack {turn}"
        _, answer = await post(client, {"input": f"turn {turn}", **({"previous_response_id": previous}
                                                                    if previous else {})})
        previous = answer["id"]
    prompt = prompt_of(fake)
    order = [prompt.index(text) for text in ("turn one", "ack one", "turn two", "ack two", "turn three")]
    assert order == sorted(order)


async def test_store_false_is_not_kept(stack):
    client, fake = stack
    _, first = await post(client, {"input": "Forget me.", "store": False})
    assert first["store"] is False
    status, error = await post(client, {"input": "Next", "previous_response_id": first["id"]})
    assert status == 400 and error["error"]["code"] == "previous_response_not_found"
    assert error["error"]["param"] == "previous_response_id" and first["id"] in error["error"]["message"]
    assert len(fake.script.requests) == 1
