"""Gateway with the fake scheduler over loopback: Ollama request fields of the wrong JSON type are its Go decode 400."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture
async def fake():
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=2048)) as pair:
        yield pair


@pytest.mark.parametrize("path, field, expected", [
    ("/api/generate", {"raw": "false"}, "cannot unmarshal string into Go struct field GenerateRequest.raw of type bool"),
    ("/api/generate", {"logprobs": "false"},
     "cannot unmarshal string into Go struct field GenerateRequest.logprobs of type bool"),
    ("/api/generate", {"truncate": 1}, "cannot unmarshal number into Go struct field GenerateRequest.truncate of type bool"),
    ("/api/generate", {"suffix": ["x"]}, "cannot unmarshal array into Go struct field GenerateRequest.suffix of type string"),
    ("/api/chat", {"logprobs": "no"}, "cannot unmarshal string into Go struct field ChatRequest.logprobs of type bool"),
    ("/api/chat", {"shift": "true"}, "cannot unmarshal string into Go struct field ChatRequest.shift of type bool"),
    ("/api/chat", {"messages": {}}, "cannot unmarshal object into Go struct field ChatRequest.messages of type "
                                    "[]api.Message"),
    ("/api/chat", {"messages": [{"role": "assistant", "content": "", "thinking": 5}, *HI]},
     "cannot unmarshal number into Go struct field ChatRequest.messages.thinking of type string"),
    ("/api/chat", {"messages": [{"role": "tool", "content": "4", "tool_name": ["f"]}]},
     "cannot unmarshal array into Go struct field ChatRequest.messages.tool_name of type string"),
], ids=["raw string", "generate logprobs string", "truncate number", "suffix list", "chat logprobs string",
        "shift string", "messages object", "message thinking number", "message tool_name list"])
async def test_a_field_of_the_wrong_type_is_ollamas_decode_error(fake, path, field, expected):
    """As Ollama's handlers answer a body its api.GenerateRequest / api.ChatRequest cannot decode (400 with
    encoding/json's error); before, such a value was read for its truthiness: `"raw": "false"` rendered no template,
    `"logprobs": "false"` returned logprobs, `"messages": {}` was a load request."""
    client, servicer = fake
    servicer.script.reply = "Hello"
    base = {"model": "fake-model", "stream": False, **({"prompt": "Hi"} if path == "/api/generate" else
                                                         {"messages": HI})}
    response = await client.post(path, json={**base, **field})
    assert response.status == 400 and await response.json() == {"error": f"json: {expected}"}
    assert servicer.script.requests == []


@pytest.mark.parametrize("path, field", [
    ("/api/generate", {"raw": None, "logprobs": False, "truncate": True, "shift": None, "suffix": ""}),
    ("/api/chat", {"logprobs": None, "messages": [{"role": "user", "content": "Hi", "thinking": None,
                                                   "tool_name": ""}]}),
], ids=["generate", "chat"])
async def test_null_and_right_types_pass(fake, path, field):
    client, servicer = fake
    servicer.script.reply = "Hello"
    base = {"model": "fake-model", "stream": False, "think": False,
            **({"prompt": "Hi"} if path == "/api/generate" else {})}
    answer = await (await client.post(path, json={**base, **field})).json()
    text = answer["response"] if path == "/api/generate" else answer["message"]["content"]
    assert text == "Hello" and answer["done"] is True and servicer.script.requests
