"""A /v1/responses answer made in a conversation (`conversation`) is a stored response like any other: what it read
is its conversation's items before its own input, so GET .../input_items lists them after it ended as while it ran,
and a later request that continues it by previous_response_id reads them too (OpenAI's previous_response_id carries
every item the earlier response read and wrote). Before, the kept turn held only the response's own input and output:
the continuation forgot the conversation's items, and input_items lost them once the response ended."""
from tests.unit.responses_calls import NO_THINK, call, prompt_of


async def _answer_in_a_conversation(client, fake) -> dict:
    _, created = await call(client, "POST", "/v1/conversations", {"items": [
        {"role": "user", "content": "My name is Zed."}, {"role": "assistant", "content": "Hello Zed."}]})
    fake.script.reply = "You asked my name."
    status, answer = await call(client, "POST", "/v1/responses", {
        "model": "fake-model", **NO_THINK, "input": "What did I ask?", "conversation": created["id"]})
    assert status == 200, answer
    return answer


async def test_previous_response_id_of_a_conversation_answer_reads_the_conversation(stack):
    client, fake = stack
    answer = await _answer_in_a_conversation(client, fake)
    fake.script.reply = "Zed."
    status, body = await call(client, "POST", "/v1/responses", {
        "model": "fake-model", **NO_THINK, "input": "And my name?", "previous_response_id": answer["id"]})
    assert status == 200, body
    prompt = prompt_of(fake)
    assert prompt.index("My name is Zed.") < prompt.index("Hello Zed.") < prompt.index("What did I ask?") \
        < prompt.index("You asked my name.") < prompt.index("And my name?")


async def test_input_items_of_an_ended_conversation_answer_list_what_it_read(stack):
    client, fake = stack
    answer = await _answer_in_a_conversation(client, fake)
    status, listed = await call(client, "GET", f"/v1/responses/{answer['id']}/input_items?order=asc")
    assert status == 200, listed
    assert [item["content"][0]["text"] for item in listed["data"]] == [
        "My name is Zed.", "Hello Zed.", "What did I ask?"]
    status, again = await call(client, "GET", f"/v1/responses/{answer['id']}")
    assert status == 200 and again["output"] == answer["output"]
