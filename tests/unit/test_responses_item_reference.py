"""/v1/responses item_reference items over the fake scheduler: the Vercel AI SDK's Responses provider (store: true, its
default) sends an earlier answer's reasoning and message items back as {"type": "item_reference", "id"}; each one
this gateway answered reads as the item itself (the prompt is the one the items give), streamed or not. A reference
to nothing kept (store: false, an unknown id) is the 400 that names it."""
import orjson
import pytest

from gateway.responses_items import ItemStore

CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
REPLY = "Let me think.</think>\n\nChecking.\n\n" + CALL
TOOLS = [{"type": "function", "name": "get_weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
USER = {"role": "user", "content": "Weather in Paris?"}


def prompt_of(fake) -> str:
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


async def first_answer(client, stream: bool, **fields) -> list:
    """The output items of a first answer (the reasoning, the message, the call), streamed or not."""
    body = {"model": "fake-model", "input": [USER], "tools": TOOLS, "stream": stream, **fields}
    response = await client.post("/v1/responses", json=body)
    assert response.status == 200, await response.text()
    if not stream:
        return (await response.json())["output"]
    events = [orjson.loads(line[6:]) for line in (await response.read()).decode().splitlines()
              if line.startswith("data: ")]
    return events[-1]["response"]["output"]


def next_turn(items: list, referenced: bool) -> list:
    """The AI SDK's next request: the reasoning and message as references (or whole), the call whole, its output."""
    call = next(item for item in items if item["type"] == "function_call")
    earlier = [{"type": "item_reference", "id": item["id"]} if referenced else item
               for item in items if item["type"] in ("reasoning", "message")]
    return [USER, *earlier, {"type": "function_call", "call_id": call["call_id"], "name": call["name"],
                             "arguments": call["arguments"]},
            {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_reference_reads_as_the_item_it_names(stack, stream):
    client, fake = stack
    fake.script.reply = REPLY
    items = await first_answer(client, stream)
    assert [item["type"] for item in items] == ["reasoning", "message", "function_call"]
    body = {"model": "fake-model", "tools": TOOLS, "max_output_tokens": 5}
    response = await client.post("/v1/responses", json={**body, "input": next_turn(items, referenced=True)})
    assert response.status == 200, await response.text()
    by_reference = prompt_of(fake)
    response = await client.post("/v1/responses", json={**body, "input": next_turn(items, referenced=False)})
    assert response.status == 200 and prompt_of(fake) == by_reference
    assert "<think>\nLet me think.\n</think>\n\nChecking.\n\n<tool_call>" in by_reference
    counted = await client.post("/v1/responses/input_tokens",
                                json={**body, "input": next_turn(items, referenced=True)})
    assert (await counted.json())["input_tokens"] == len(fake.script.requests[-1].prompt_token_ids)


async def test_an_answer_with_store_false_is_not_kept(stack):
    client, fake = stack
    fake.script.reply = REPLY
    items = await first_answer(client, False, store=False)
    response = await client.post("/v1/responses", json={"model": "fake-model", "tools": TOOLS,
                                                        "input": next_turn(items, referenced=True)})
    error = (await response.json())["error"]
    assert response.status == 400 and (error["param"], error["code"]) == ("input[1].id", "invalid_value")
    assert error["message"].startswith(f"input[1] is an item_reference to '{items[0]['id']}', an item this server "
                                       f"does not hold")


def test_the_least_recently_used_items_leave_first():
    store = ItemStore(max_items=2)
    store.keep({}, [{"id": "a", "type": "message"}, {"id": "b", "type": "message"}])
    store.resolve({"input": [{"type": "item_reference", "id": "a"}]})     # a is used again: b is the oldest
    store.keep({"store": True}, [{"id": "c", "type": "message"}])
    resolved = store.resolve({"input": [{"type": "item_reference", "id": name} for name in "abc"]})["input"]
    assert resolved == [{"id": "a", "type": "message"}, {"type": "item_reference", "id": "b"},
                        {"id": "c", "type": "message"}]
    small = ItemStore(max_bytes=40)
    small.keep({}, [{"id": "x", "text": "y" * 100}, {"id": "z"}])
    assert small.resolve({"input": [{"type": "item_reference", "id": "x"}, {"type": "item_reference", "id": "z"}]}) \
        == {"input": [{"type": "item_reference", "id": "x"}, {"id": "z"}]} and small.num_bytes == len('{"id":"z"}')
