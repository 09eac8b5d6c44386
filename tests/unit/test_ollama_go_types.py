"""Gateway with the fake scheduler over loopback: Ollama request fields of the wrong JSON type are its Go decode 400."""
import pytest


HI = [{"role": "user", "content": "Hi"}]


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
    # stream and _debug_render_only are bools in both structs (Stream *bool, DebugRenderOnly bool): they were our own
    # "stream must be true or false".
    ("/api/chat", {"stream": "yes"}, "cannot unmarshal string into Go struct field ChatRequest.stream of type bool"),
    ("/api/generate", {"stream": 1}, "cannot unmarshal number into Go struct field GenerateRequest.stream of type bool"),
    ("/api/chat", {"_debug_render_only": "yes"},
     "cannot unmarshal string into Go struct field ChatRequest._debug_render_only of type bool"),
    ("/api/pull", {"stream": "no"}, "cannot unmarshal string into Go struct field PullRequest.stream of type bool"),
], ids=["raw string", "generate logprobs string", "truncate number", "suffix list", "chat logprobs string",
        "shift string", "messages object", "message thinking number", "message tool_name list", "chat stream string",
        "generate stream number", "debug render string", "pull stream string"])
async def test_a_field_of_the_wrong_type_is_ollamas_decode_error(fake, path, field, expected):
    """As Ollama's handlers answer a body its api.GenerateRequest / api.ChatRequest cannot decode (400 with
    encoding/json's error); before, such a value was read for its truthiness: `"raw": "false"` rendered no template,
    `"logprobs": "false"` returned logprobs, `"messages": {}` was a load request."""
    client, servicer = fake
    servicer.script.reply = "Hello"
    base = {"model": "fake-model", "stream": False, **({"prompt": "Hi"} if path == "/api/generate" else
                                                         {} if path == "/api/pull" else {"messages": HI})}
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


TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
CALL = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}


@pytest.mark.parametrize("method, path, body, expected", [
    ("POST", "/api/generate", {"prompt": 0}, "number into Go struct field GenerateRequest.prompt of type string"),
    ("POST", "/api/generate", {"prompt": "Hi", "images": ""},
     "string into Go struct field GenerateRequest.images of type []api.ImageData"),
    ("POST", "/api/generate", {"prompt": "Hi", "system": ["x"]},
     "array into Go struct field GenerateRequest.system of type string"),
    ("POST", "/api/chat", {"messages": HI, "tools": 0}, "number into Go struct field ChatRequest.tools of type api.Tools"),
    # encoding/json names the innermost struct it decodes the field into (decodeState.object sets errorContext.Struct
    # per field), down to a type with its own UnmarshalJSON (api.Message): ToolFunction here, ChatRequest for a
    # message's fields; goose#7087 quotes Ollama's "Go struct field .tools.function.parameters.properties.type" from
    # an unnamed struct of an older api.
    ("POST", "/api/chat", {"messages": HI, "tools": [{**TOOL, "function": {"name": "f", "parameters": "none"}}]},
     "string into Go struct field ToolFunction.tools.function.parameters of type api.ToolFunctionParameters"),
    ("POST", "/api/chat", {"messages": HI, "tools": [{**TOOL, "type": 5}]},
     "number into Go struct field Tool.tools.type of type string"),
    ("POST", "/api/chat", {"messages": HI, "tools": [{**TOOL, "function": {"name": 5}}]},
     "number into Go struct field ToolFunction.tools.function.name of type string"),
    ("POST", "/api/chat", {"messages": HI, "tools": [{**TOOL, "function": {"name": "f", "parameters": {
        "type": "object", "required": "a"}}}]},
     "string into Go struct field ToolFunctionParameters.tools.function.parameters.required of type []string"),
    # api.ToolProperty behind the ordered map's own UnmarshalJSON: the fields after the map's, its keys left out.
    ("POST", "/api/chat", {"messages": HI, "tools": [{**TOOL, "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": 5}}}}}]},
     "number into Go struct field ToolFunctionParameters.tools.function.parameters.properties.type of type []string"),
    ("POST", "/api/chat", {"messages": HI, "tools": [{**TOOL, "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"description": 1}}}}}}}]},
     "number into Go struct field ToolFunctionParameters.tools.function.parameters.properties.properties.description "
     "of type string"),
    ("POST", "/api/chat", {"messages": HI, "tools": [{**TOOL, "function": {"name": "f", "parameters": {
        "type": "object", "properties": []}}}]}, "Value looks like object, but can't find closing '}' symbol"),
    ("POST", "/api/chat", {"messages": [{"role": "user", "content": "Hi", "images": 0}]},
     "number into Go struct field ChatRequest.messages.images of type []api.ImageData"),
    # Arguments are an ordered map whose UnmarshalJSON (wk8/go-ordered-map over buger/jsonparser's ObjectEach) fails
    # anything but an object in jsonparser's words, as Ollama answers them (Xoshbin/asyar#513, openclaw/openclaw#50749):
    # a JSON text of an object is still read here (OpenAI clients write them so), other text, numbers, lists are not.
    ("POST", "/api/chat", {"messages": [*HI, {**CALL, "tool_calls": [{"function": {"name": "f", "arguments": 0}}]}]},
     "Value looks like object, but can't find closing '}' symbol"),
    ("POST", "/api/chat", {"messages": [*HI, {**CALL, "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}]},
     "Value looks like object, but can't find closing '}' symbol"),
    ("POST", "/api/chat", {"messages": [*HI, {**CALL, "tool_calls": [{"function": {"name": "f", "arguments": []}}]}]},
     "Value looks like object, but can't find closing '}' symbol"),
    ("POST", "/api/chat", {"messages": [{"role": 1, "content": "Hi"}]},
     "number into Go struct field ChatRequest.messages.role of type string"),
    ("POST", "/api/show", {"model": "fake-model", "verbose": "yes"},
     "string into Go struct field ShowRequest.verbose of type bool"),
    ("POST", "/api/show", [1], "array into Go value of type api.ShowRequest"),
    ("POST", "/api/pull", {"model": "fake-model", "insecure": "no"},
     "string into Go struct field PullRequest.insecure of type bool"),
    ("DELETE", "/api/delete", {"model": 5}, "number into Go struct field DeleteRequest.model of type string"),
    ("POST", "/api/copy", {"source": "fake-model", "destination": 1},
     "number into Go struct field CopyRequest.destination of type string"),
    ("POST", "/api/embed", {"model": "fake-model", "input": "hi", "truncate": "no"},
     "string into Go struct field EmbedRequest.truncate of type bool"),
], ids=["prompt number", "images string", "system list", "tools number", "parameters string", "tool type number",
        "tool name number", "required string", "property type number", "nested description number",
        "properties list", "message images",
        "arguments number", "arguments text", "arguments list", "role number", "show verbose", "show body list", "pull insecure", "delete model number",
        "copy destination", "embed truncate"])
async def test_every_route_decodes_its_body_as_ollamas_go_struct(fake, method, path, body, expected):
    """Ollama decodes each body into its api struct first (a wrong type is encoding/json's 400). Before, these were read
    for their truthiness or not at all: `"prompt": 0` generated from an empty prompt, `"tools": 0` and `"images": ""`
    were none, a string `parameters` or `arguments: 0` passed, /api/show and /api/pull ignored `verbose` / `insecure`
    of any type, and management routes answered their 501 / 404 whatever the body's types."""
    client, servicer = fake
    servicer.script.reply = "Hello"
    if isinstance(body, dict) and path in ("/api/generate", "/api/chat"):
        body = {"model": "fake-model", "stream": False, **body}
    response = await client.request(method, path, json=body)
    words = expected if expected.startswith("Value looks") else f"json: cannot unmarshal {expected}"
    assert response.status == 400 and await response.json() == {"error": words}
    assert servicer.script.requests == []


async def test_a_tool_call_with_json_text_arguments_still_passes(fake):
    """Clients written for /v1 send arguments as JSON text; Ollama's object and that text both pass."""
    client, servicer = fake
    servicer.script.reply = "Hello"
    messages = [*HI, {**CALL, "tool_calls": [{"function": {"name": "f", "arguments": '{"x": 1}'}}]},
                {"role": "tool", "content": "4", "tool_name": "f"}]
    response = await client.post("/api/chat", json={"model": "fake-model", "stream": False, "messages": messages,
                                                    "tools": [TOOL], "think": False})
    assert response.status == 200 and (await response.json())["message"]["content"] == "Hello"


@pytest.mark.parametrize("method, path, body, expected", [
    ("POST", "/api/show", {"model": "fake-model", "options": [1]},
     "cannot unmarshal array into Go struct field ShowRequest.options of type map[string]interface {}"),
    ("POST", "/api/embed", {"model": "fake-model", "input": "x", "dimensions": 2.5},
     "cannot unmarshal number 2.5 into Go struct field EmbedRequest.dimensions of type int"),
    ("POST", "/api/embeddings", {"model": "fake-model", "prompt": "x", "options": "y"},
     "cannot unmarshal string into Go struct field EmbeddingRequest.options of type map[string]interface {}"),
    ("POST", "/api/push", {"model": "fake-model", "stream": "no"},
     "cannot unmarshal string into Go struct field PushRequest.stream of type bool"),
    ("POST", "/api/create", {"model": "m", "from": 5},
     "cannot unmarshal number into Go struct field CreateRequest.from of type string"),
    ("POST", "/api/create", {"model": "m", "messages": [{"role": "user", "content": 1}]},
     "cannot unmarshal number into Go struct field CreateRequest.messages.content of type string"),
    ("POST", "/api/create", {"model": "m", "files": ["a.gguf"]},
     "cannot unmarshal array into Go struct field CreateRequest.files of type map[string]string"),
], ids=["show options", "embed dimensions", "embeddings options", "push stream", "create from", "create message",
        "create files"])
async def test_the_remaining_fields_are_ollamas_decode_error(fake, method, path, body, expected):
    """api/types.go ShowRequest.Options, EmbedRequest.Dimensions / Options, EmbeddingRequest.Options,
    PushRequest.Stream and CreateRequest were not checked: /api/show {"options": [1]} answered 200, the others
    their 501."""
    client, _ = fake
    response = await client.request(method, path, json=body)
    assert response.status == 400 and await response.json() == {"error": f"json: {expected}"}


@pytest.mark.parametrize("method, path", [("POST", "/api/chat"), ("POST", "/api/generate"), ("POST", "/api/show"),
                                          ("POST", "/api/pull"), ("POST", "/api/embed"), ("DELETE", "/api/delete")],
                         ids=["chat", "generate", "show", "pull", "embed", "delete"])
@pytest.mark.parametrize("data", [b"", b" \n"], ids=["empty", "whitespace"])
async def test_an_empty_body_is_ollamas_missing_request_body(fake, method, path, data):
    """Every Ollama handler answers the io.EOF of binding an empty body with 400 "missing request body"
    (server/routes.go); the OpenAI routes keep their own words."""
    client, servicer = fake
    response = await client.request(method, path, data=data)
    assert (response.status, await response.json()) == (400, {"error": "missing request body"})
    assert not servicer.script.requests


async def test_keys_match_fields_in_any_case_as_go_decodes_them(stack):
    """encoding/json matches a key to a struct field's json name exactly, else case-insensitively: a Go client whose
    structs carry no json tags sends "Model", "Messages", "Role"; Ollama answers it, and the later of two keys for
    one field wins."""
    client, servicer = stack
    servicer.script.reply = "Hello"
    body = {"Model": "fake-model", "STREAM": False, "Think": False, "Keep_Alive": "1m", "Options": {"num_predict": 3},
            "Messages": [{"Role": "user", "Content": "Hi there"}]}
    response = await client.post("/api/chat", json=body)
    assert response.status == 200
    answer = await response.json()
    assert answer["model"] == "fake-model" and answer["message"] == {"role": "assistant", "content": "Hello"}
    request = servicer.script.requests[-1]
    assert "Hi there" in servicer.tokenizer.decode(list(request.prompt_token_ids)) and request.max_tokens == 3
    body = {"model": "nope", "Model": "fake-model", "Prompt": "Hi", "Raw": True, "Stream": False}
    answer = await (await client.post("/api/generate", json=body)).json()
    assert answer["model"] == "fake-model" and answer["response"] == "Hello" and "context" not in answer
    response = await client.post("/api/generate", json={"Model": "fake-model", "Prompt": "Hi", "RAW": "yes"})
    assert await response.json() == {"error": "json: cannot unmarshal string into Go struct field "
                                              "GenerateRequest.raw of type bool"}
