"""LM Studio /api/v1/chat's stateful chats (fake scheduler): an answer carries response_id (store defaults to true), and
previous_response_id continues that chat with only the new input, as lmstudio.ai/docs/developer/rest/stateful-chats
documents it; store false keeps nothing. Before, every answer lacked response_id and previous_response_id was a 400."""
import orjson
import pytest

from gateway.response_threads import ResponseThreads
from gateway.responses_items import ItemStore

REPLY = "plan\n</think>\n\nBlue it is"


def prompt_of(servicer, index: int = -1) -> str:
    request = servicer.script.requests[index]
    return servicer.tokenizer.decode(list(request.prompt_token_ids), skip_special_tokens=False)


async def chat(client, **body) -> dict:
    response = await client.post("/api/v1/chat", json={"model": "fake-model", **body})
    assert response.status == 200, await response.text()
    return await response.json()


async def test_previous_response_id_continues_the_chat_with_its_system_prompt(fake):
    client, servicer = fake
    first = await chat(client, input="My favorite color is blue.", system_prompt="Be terse.")
    assert first["response_id"].startswith("resp_")
    second = await chat(client, input="What color did I mention?", previous_response_id=first["response_id"])
    assert second["response_id"].startswith("resp_") and second["response_id"] != first["response_id"]
    prompt = prompt_of(servicer)
    # The system prompt, the first turn and its answer, then the new input, in that order.
    order = [prompt.index(text) for text in ("Be terse.", "My favorite color is blue.", "Blue it is",
                                             "What color did I mention?")]
    assert order == sorted(order) and prompt.count("Be terse.") == 1
    assert second["stats"]["input_tokens"] > first["stats"]["input_tokens"]


async def test_each_response_is_a_point_a_chat_can_branch_from(fake):
    client, servicer = fake
    root = await chat(client, input="Start here.")
    left = await chat(client, input="Go left.", previous_response_id=root["response_id"])
    await chat(client, input="Go right.", previous_response_id=root["response_id"])
    right_prompt = prompt_of(servicer)
    assert "Start here." in right_prompt and "Go right." in right_prompt and "Go left." not in right_prompt
    await chat(client, input="And on.", previous_response_id=left["response_id"], system_prompt="New rules.")
    prompt = prompt_of(servicer)
    assert all(text in prompt for text in ("New rules.", "Start here.", "Go left.", "And on."))
    assert "Go right." not in prompt


async def test_store_false_keeps_nothing(fake):
    client, _ = fake
    answer = await chat(client, input="Forget me.", store=False)
    assert "response_id" not in answer and answer["output"][-1]["content"] == "Blue it is"


async def test_a_streamed_chat_ends_with_its_response_id_and_can_be_continued(fake):
    client, servicer = fake
    response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Streamed turn.",
                                                       "stream": True})
    events = [orjson.loads(line[6:]) for line in (await response.read()).decode().splitlines()
              if line.startswith("data: ")]
    assert events[-1]["type"] == "chat.end"
    response_id = events[-1]["result"]["response_id"]
    await chat(client, input="Next turn.", previous_response_id=response_id)
    prompt = prompt_of(servicer)
    assert prompt.index("Streamed turn.") < prompt.index("Blue it is") < prompt.index("Next turn.")


@pytest.mark.parametrize("value, words", [("resp_0123", "Response 'resp_0123' not found"),
                                          (7, '"previous_response_id" must be a string')],
                         ids=["unknown id", "not a string"])
async def test_a_previous_response_id_not_held_is_a_400_naming_it(fake, value, words):
    client, servicer = fake
    response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Hi",
                                                       "previous_response_id": value})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "previous_response_id" and words in error["message"]
    assert not servicer.script.requests


def test_a_chat_whose_earlier_turn_aged_out_names_that_turn():
    threads = ResponseThreads("/api/v1/chat", ItemStore(max_items=2))
    first = threads.keep({}, threads.thread({}), [{"role": "user", "content": "one"}])
    second = threads.keep({}, threads.thread({"previous_response_id": first}), [])
    threads.keep({}, threads.thread({}), [])   # the least recently used, `first`, goes
    with pytest.raises(Exception) as raised:
        threads.thread({"previous_response_id": second})
    assert f"its earlier turn '{first}' is no longer held" in raised.value.message
