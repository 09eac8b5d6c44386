"""/v1/responses stored responses (fake scheduler): GET /v1/responses/{id} returns the object create returned, DELETE
forgets it (OpenAI's deleted object, then 404s), input_items lists what it read as OpenAI's paged list (ids, order,
limit / after / before), and store false keeps nothing, as OpenAI's API reference and the openai SDK's
responses.retrieve / .delete / .input_items.list expect (vLLM's serving_responses.py serves retrieve from its store).
Before, every one of these routes was a 404, so SDK code that reads a response back failed."""
import orjson
import pytest
from openai.types.responses import Response, ResponseItemList

from tests.unit.responses_calls import NO_THINK, call_model as call
from tests.unit.spec_oracle import spec_errors, strict

TOOLS = [{"type": "function", "name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"


async def test_retrieve_returns_the_response_create_returned(stack):
    client, fake = stack
    fake.script.reply = "Seven"
    status, created = await call(client, "POST", "/v1/responses", {"input": "A prime below 10?",
                                                                   "metadata": {"k": "v"}})
    assert status == 200 and created["status"] == "completed"
    status, read = await call(client, "GET", f"/v1/responses/{created['id']}")
    assert status == 200 and read == created
    assert read["output"][0]["content"][0]["text"] == "Seven" and read["usage"]["output_tokens"] > 0
    assert strict(Response, read) == [] and spec_errors("openai", "Response", read) == []


async def test_a_streamed_response_is_read_back_as_its_completed_event_says(stack):
    client, fake = stack
    fake.script.reply = "Streamed"
    response = await client.post("/v1/responses", data=orjson.dumps(
        {"model": "fake-model", **NO_THINK, "input": "Hi", "stream": True}))
    events = [orjson.loads(line[6:]) for line in (await response.read()).decode().split("\n")
              if line.startswith("data: ")]
    completed = events[-1]["response"]
    status, read = await call(client, "GET", f"/v1/responses/{completed['id']}")
    assert status == 200 and read == completed and read["status"] == "completed"


async def test_store_false_is_not_held(stack):
    client, _ = stack
    _, created = await call(client, "POST", "/v1/responses", {"input": "Forget me.", "store": False})
    for method, path in (("GET", ""), ("GET", "/input_items"), ("DELETE", "")):
        status, error = await call(client, method, f"/v1/responses/{created['id']}{path}")
        assert status == 404 and error["error"]["code"] == "response_not_found", (method, path)
        assert error["error"]["param"] == "response_id" and created["id"] in error["error"]["message"]


async def test_delete_forgets_the_response(stack):
    client, _ = stack
    _, created = await call(client, "POST", "/v1/responses", {"input": "Hi"})
    status, deleted = await call(client, "DELETE", f"/v1/responses/{created['id']}")
    assert status == 200 and deleted == {"id": created["id"], "object": "response", "deleted": True}
    status, error = await call(client, "GET", f"/v1/responses/{created['id']}")
    assert status == 404 and error["error"]["code"] == "response_not_found"
    status, error = await call(client, "POST", "/v1/responses", {"input": "Next",
                                                                 "previous_response_id": created["id"]})
    assert status == 400 and error["error"]["code"] == "previous_response_not_found"
    status, error = await call(client, "DELETE", f"/v1/responses/{created['id']}")
    assert status == 404


async def test_input_items_list_what_the_response_read_newest_first(stack):
    client, fake = stack
    fake.script.reply = "Seven"
    _, first = await call(client, "POST", "/v1/responses", {"input": "A prime below 10?", "instructions": "Brief."})
    fake.script.reply = "Fourteen"
    _, second = await call(client, "POST", "/v1/responses", {
        "previous_response_id": first["id"],
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Times 2"}]}]})
    status, listed = await call(client, "GET", f"/v1/responses/{second['id']}/input_items")
    assert status == 200 and listed["object"] == "list" and listed["has_more"] is False
    assert strict(ResponseItemList, listed) == [] and spec_errors("openai", "ResponseItemList", listed) == []
    texts = [(item["role"], item["content"][0]["text"]) for item in listed["data"]]
    # Newest first (OpenAI's default order): this input, the earlier answer, the earlier input; no instructions.
    assert texts == [("user", "Times 2"), ("assistant", "Seven"), ("user", "A prime below 10?")]
    assert listed["data"][1] == first["output"][0]
    assert listed["data"][2]["content"] == [{"type": "input_text", "text": "A prime below 10?"}]
    assert [item["id"] for item in listed["data"]] == [listed["first_id"], listed["data"][1]["id"], listed["last_id"]]
    assert len({item["id"] for item in listed["data"]}) == 3
    # Ids are kept: the list reads the same twice.
    assert (await call(client, "GET", f"/v1/responses/{second['id']}/input_items"))[1] == listed


async def test_input_items_pages_by_limit_after_and_before(stack):
    client, _ = stack
    _, created = await call(client, "POST", "/v1/responses", {"input": [
        {"role": "user", "content": f"m{i}"} for i in range(5)]})
    path = f"/v1/responses/{created['id']}/input_items"
    _, first = await call(client, "GET", f"{path}?order=asc&limit=2")
    assert [item["content"][0]["text"] for item in first["data"]] == ["m0", "m1"] and first["has_more"] is True
    _, second = await call(client, "GET", f"{path}?order=asc&limit=2&after={first['last_id']}")
    assert [item["content"][0]["text"] for item in second["data"]] == ["m2", "m3"] and second["has_more"] is True
    _, back = await call(client, "GET", f"{path}?order=asc&limit=1&before={second['first_id']}")
    assert [item["content"][0]["text"] for item in back["data"]] == ["m1"] and back["has_more"] is True
    _, newest = await call(client, "GET", f"{path}?limit=1&include[]=message.output_text.logprobs")
    assert [item["content"][0]["text"] for item in newest["data"]] == ["m4"]


@pytest.mark.parametrize("query, param", [
    ("limit=0", "limit"), ("limit=101", "limit"), ("limit=ten", "limit"), ("order=newest", "order"),
    ("after=msg_nope", "after"), ("include[]=message.output_text.logprob", "include"),
], ids=["zero", "over", "nan", "order", "after", "include"])
async def test_input_items_query_errors_name_the_parameter(stack, query, param):
    client, _ = stack
    _, created = await call(client, "POST", "/v1/responses", {"input": "Hi"})
    status, error = await call(client, "GET", f"/v1/responses/{created['id']}/input_items?{query}")
    assert status == 400 and error["error"]["param"] == param and error["error"]["type"] == "invalid_request_error"
    assert spec_errors("openai", "ErrorResponse", error) == []


async def test_a_tool_loops_items_are_listed_with_ids_and_status(stack):
    client, fake = stack
    fake.script.reply = CALL
    _, first = await call(client, "POST", "/v1/responses", {"input": "Weather in Paris?", "tools": TOOLS})
    call_item = first["output"][-1]
    fake.script.reply = "Sunny"
    _, second = await call(client, "POST", "/v1/responses", {"previous_response_id": first["id"], "tools": TOOLS,
                                                             "input": [{"type": "function_call_output",
                                                                        "call_id": call_item["call_id"],
                                                                        "output": "22C"}]})
    _, listed = await call(client, "GET", f"/v1/responses/{second['id']}/input_items?order=asc")
    assert [item["type"] for item in listed["data"]] == ["message", "function_call", "function_call_output"]
    assert listed["data"][1] == call_item
    assert listed["data"][2]["status"] == "completed" and listed["data"][2]["id"]
    assert strict(ResponseItemList, listed) == []


async def test_retrieve_while_a_stream_runs_is_in_progress(stack):
    client, fake = stack
    fake.script.reply, fake.script.delay_s = "one two three four five six", 0.05
    response = await client.post("/v1/responses", data=orjson.dumps(
        {"model": "fake-model", **NO_THINK, "input": "Hi", "stream": True}))
    line = await response.content.readline()
    while not line.startswith(b"data: "):
        line = await response.content.readline()
    response_id = orjson.loads(line[6:])["response"]["id"]
    status, read = await call(client, "GET", f"/v1/responses/{response_id}")
    assert status == 200 and read["status"] == "in_progress" and read["usage"] is None
    await response.read()
    status, read = await call(client, "GET", f"/v1/responses/{response_id}")
    assert read["status"] == "completed"
