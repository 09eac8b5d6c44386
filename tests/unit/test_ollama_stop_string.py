"""Ollama's options.stop is a []string (api.Options.Stop); its Options.FromMap refuses anything but a JSON array:
'option "stop" must be of type array' (and 'must be of an array of strings' for an array holding a non-string).
A lone string was taken as a one-element list."""
import pytest


@pytest.mark.parametrize("route", ["/api/generate", "/api/chat"])
@pytest.mark.parametrize("stop, message", [("END", 'option "stop" must be of type array'),
                                           (["a", 1], 'option "stop" must be of an array of strings')])
async def test_stop_must_be_an_array_of_strings(stack, route, stop, message):
    client, fake = stack
    body = {"model": "fake-model", "stream": False, "options": {"stop": stop}}
    body.update({"prompt": "hi"} if route == "/api/generate" else {"messages": [{"role": "user", "content": "hi"}]})
    response = await client.post(route, json=body)
    assert response.status == 400 and await response.json() == {"error": message}
    assert not fake.script.requests


async def test_a_stop_list_still_stops(stack):
    client, fake = stack
    body = {"model": "fake-model", "stream": False, "prompt": "hi", "think": False, "options": {"stop": ["world"]}}
    response = await client.post("/api/generate", json=body)
    reply = await response.json()
    assert response.status == 200 and reply["done"] is True, reply
    assert reply["response"] == "Hello ", reply
