"""OpenAI's Conversations API (fake scheduler): /v1/conversations and its items as OpenAI's API reference and the
openai SDK's client.conversations describe them, and /v1/responses with `conversation`, which reads the
conversation's items before its input and adds its input and output items to it. Before, /v1/conversations was a
404 (no route) and `conversation` a 400, so the Agents SDK's OpenAIConversationsSession failed on its first call."""
import pytest
from openai import AsyncOpenAI, NotFoundError
from openai.types.conversations import Conversation, ConversationDeletedResource, ConversationItemList
from openai.types.responses import Response

from tests.unit.responses_calls import NO_THINK, call, prompt_of
from tests.unit.spec_oracle import strict


async def test_a_conversation_is_created_read_updated_and_deleted(stack):
    client, _ = stack
    status, created = await call(client, "POST", "/v1/conversations", {
        "metadata": {"topic": "demo"}, "items": [{"type": "message", "role": "user", "content": "Hello!"}]})
    assert status == 200 and created["object"] == "conversation" and created["id"].startswith("conv_")
    assert created["metadata"] == {"topic": "demo"} and strict(Conversation, created) == []
    path = f"/v1/conversations/{created['id']}"
    assert await call(client, "GET", path) == (200, created)
    status, updated = await call(client, "POST", path, {"metadata": {"topic": "new"}})
    assert status == 200 and updated == {**created, "metadata": {"topic": "new"}}
    status, listed = await call(client, "GET", f"{path}/items")
    assert status == 200 and strict(ConversationItemList, listed) == []
    assert [item["content"] for item in listed["data"]] == [[{"type": "input_text", "text": "Hello!"}]]
    status, deleted = await call(client, "DELETE", path)
    assert deleted == {"id": created["id"], "object": "conversation.deleted", "deleted": True}
    assert strict(ConversationDeletedResource, deleted) == []
    status, error = await call(client, "GET", path)
    assert status == 404 and error["error"]["code"] == "conversation_not_found"


async def test_items_are_added_listed_read_and_deleted(stack):
    client, _ = stack
    _, created = await call(client, "POST", "/v1/conversations", {})
    path = f"/v1/conversations/{created['id']}/items"
    status, added = await call(client, "POST", path, {"items": [
        {"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]})
    assert status == 200 and [item["role"] for item in added["data"]] == ["user", "assistant"]
    assert added["data"][1]["content"] == [{"type": "output_text", "text": "two", "annotations": []}]
    _, newest = await call(client, "GET", f"{path}?limit=1")
    assert [item["id"] for item in newest["data"]] == [added["last_id"]] and newest["has_more"] is True
    status, item = await call(client, "GET", f"{path}/{added['first_id']}")
    assert status == 200 and item == added["data"][0]
    status, conversation = await call(client, "DELETE", f"{path}/{added['first_id']}")
    assert status == 200 and conversation["id"] == created["id"]
    _, listed = await call(client, "GET", f"{path}?order=asc")
    assert [item["id"] for item in listed["data"]] == [added["last_id"]]
    status, error = await call(client, "GET", f"{path}/{added['first_id']}")
    assert status == 404 and error["error"]["param"] == "item_id"


@pytest.mark.parametrize("body, param", [
    ({"items": [{"type": "message", "role": "user", "content": 3}]}, "items"),
    ({"items": [{"role": "user", "content": "x"}] * 21}, "items"),
    ({"metadata": {"k": 1}}, "metadata"),
], ids=["bad-item", "too-many", "metadata"])
async def test_a_bad_conversation_body_is_a_400_naming_it(stack, body, param):
    client, _ = stack
    status, error = await call(client, "POST", "/v1/conversations", body)
    assert status == 400 and error["error"]["param"].startswith(param), error


async def test_a_response_in_a_conversation_reads_its_items_and_adds_its_own(stack):
    client, fake = stack
    _, created = await call(client, "POST", "/v1/conversations", {"items": [
        {"role": "user", "content": "My name is Bob."}, {"role": "assistant", "content": "Hi Bob."}]})
    fake.script.reply = "You are Bob."
    status, answer = await call(client, "POST", "/v1/responses", {
        "model": "fake-model", **NO_THINK, "input": "Who am I?", "conversation": created["id"]})
    assert status == 200 and answer["conversation"] == {"id": created["id"]} and strict(Response, answer) == []
    prompt = prompt_of(fake)
    assert prompt.index("My name is Bob.") < prompt.index("Hi Bob.") < prompt.index("Who am I?")
    _, listed = await call(client, "GET", f"/v1/conversations/{created['id']}/items?order=asc")
    assert [item["content"][0]["text"] for item in listed["data"]] == [
        "My name is Bob.", "Hi Bob.", "Who am I?", "You are Bob."]
    assert listed["data"][-1] == answer["output"][0]
    # The {"id": ...} form names it too, and the next turn reads the whole conversation.
    fake.script.reply = "Yes."
    status, _ = await call(client, "POST", "/v1/responses", {
        "model": "fake-model", **NO_THINK, "input": "Sure?", "conversation": {"id": created["id"]}})
    assert status == 200 and prompt_of(fake).index("You are Bob.") < prompt_of(fake).index("Sure?")


async def test_conversation_errors(stack):
    client, fake = stack
    status, error = await call(client, "POST", "/v1/responses", {"model": "fake-model", "input": "x",
                                                                 "conversation": "conv_nope"})
    assert status == 404 and error["error"]["param"] == "conversation"
    _, created = await call(client, "POST", "/v1/conversations", {})
    status, error = await call(client, "POST", "/v1/responses", {"model": "fake-model", "input": "x",
                                                                 "conversation": created["id"],
                                                                 "previous_response_id": "resp_1"})
    assert status == 400 and error["error"]["param"] == "conversation" and "Mutually exclusive" in \
        error["error"]["message"]
    # A conversation's id is no response's: previous_response_id, GET and input_items of it are not-found errors
    # (the first was a 500: the conversation, held in the same store, was read as a turn).
    status, error = await call(client, "POST", "/v1/responses", {"model": "fake-model", "input": "x",
                                                                 "previous_response_id": created["id"]})
    assert status == 400 and error["error"]["code"] == "previous_response_not_found"
    for path in ("", "/input_items"):
        status, error = await call(client, "GET", f"/v1/responses/{created['id']}{path}")
        assert status == 404 and error["error"]["code"] == "response_not_found"
    assert fake.script.requests == []


async def test_the_openai_sdk_drives_a_conversation(stack):
    client, fake = stack
    sdk = AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="x", max_retries=0)
    # The Agents SDK's OpenAIConversationsSession creates its conversation with items=[] (an empty list was a 400).
    conversation = await sdk.conversations.create(items=[])
    await sdk.conversations.items.create(conversation.id, items=[{"role": "user", "content": "Hi"}])
    await sdk.conversations.items.create(conversation.id, items=[{"role": "assistant", "content": "Hello"}])
    fake.script.reply = "Fine."
    answer = await sdk.responses.create(model="fake-model", input="How are you?", conversation=conversation.id,
                                        reasoning={"effort": "none"})
    texts = [item.content[0].text async for item in sdk.conversations.items.list(conversation.id, order="asc")]
    assert texts == ["Hi", "Hello", "How are you?", "Fine."] and answer.conversation.id == conversation.id
    await sdk.conversations.delete(conversation.id)
    with pytest.raises(NotFoundError):
        await sdk.conversations.retrieve(conversation.id)
    await sdk.close()


# Items of a wrong JSON type, or with a type field that is no string, on both routes that take items: each was a 500
# (input_messages read them as the Responses schema had already checked them: 'int' object has no attribute 'get',
# unhashable type: 'list'); now the 400 a /v1/responses input gets, naming the item.
BAD_ITEMS = [([1], "items[0]"), (["hi"], "items[0]"), ([None], "items[0]"), ([[{"role": "user"}]], "items[0]"),
             ([{"role": "user", "content": "x"}, 2.5], "items[1]"), ([{"type": ["message"], "content": "x"}],
                                                                     "items[0].type"),
             ([{"type": {"a": 1}, "role": "user", "content": "x"}], "items[0].type"), ([{"type": 3}], "items[0].type")]


@pytest.mark.parametrize("route", ["create", "add"])
@pytest.mark.parametrize("items, param", BAD_ITEMS, ids=[str(i) for i in range(len(BAD_ITEMS))])
async def test_an_item_of_a_wrong_type_is_a_400_naming_it(stack, route, items, param):
    client, fake = stack
    path = "/v1/conversations"
    if route == "add":
        _, created = await call(client, "POST", path, {})
        path = f"{path}/{created['id']}/items"
    status, error = await call(client, "POST", path, {"items": items})
    assert status == 400 and error["error"]["param"] == param, error
    assert error["error"]["type"] == "invalid_request_error" and param in error["error"]["message"]
    assert fake.script.requests == []
