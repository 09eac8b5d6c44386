"""LM Studio's SDK websocket API (gateway/lmstudio_sdk.py), driven with the messages lmstudio-python 1.5 sends (captured
from `lms.Client(host).llm.model().respond(...)`, `.complete(...)`, `.act(...)`) and read as its json_api.py reads the
answers. Before it, GET /lmstudio-greeting and ws://host/llm were 404s: lmstudio.Client raised 'LM Studio is not
reachable' on this server."""
import orjson
import pytest

REPLY = "<think>\nhmm\n</think>\n\nHello world"


async def _session(client, namespace="llm"):
    ws = await client.ws_connect(f"/{namespace}")
    await ws.send_json({"authVersion": 1, "clientIdentifier": "c", "clientPasskey": "k"})
    assert await ws.receive_json() == {"success": True}
    return ws


async def _rpc(ws, endpoint, parameter=None):
    call = {"type": "rpcCall", "endpoint": endpoint, "callId": 1}
    if parameter is not None:
        call["parameter"] = parameter
    await ws.send_json(call)
    return await ws.receive_json()


def _predict(fields=(), messages=None, layers=None, channel_id=1):
    """A predict channelCreate as lmstudio-python writes it (PredictionEndpoint)."""
    messages = messages or [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    layers = layers or [{"layerName": "apiOverride", "config": {"fields": list(fields)}}]
    return {"type": "channelCreate", "endpoint": "predict", "channelId": channel_id, "creationParameter": {
        "modelSpecifier": {"type": "query", "query": {"identifier": "fake-model"}},
        "history": {"messages": messages}, "predictionConfigStack": {"layers": layers}}}


async def _channel(ws, create) -> list:
    """Every channelSend message of the channel, then its close (or channelError) as the last item."""
    await ws.send_json(create)
    out = []
    while True:
        message = await ws.receive_json(timeout=10)
        if message["type"] == "channelSend":
            out.append(message["message"])
        else:
            return out + [message]


async def test_the_greeting_and_the_loaded_model(fake):
    client, _ = fake
    assert await (await client.get("/lmstudio-greeting")).json() == {"lmstudio": True}
    ws = await _session(client)
    answer = await _rpc(ws, "listLoaded")
    assert answer["type"] == "rpcResult" and [m["identifier"] for m in answer["result"]] == ["fake-model"]
    info = answer["result"][0]
    assert (info["type"], info["modelKey"], info["contextLength"], info["maxContextLength"]) == (
        "llm", "fake-model", 2048, 2048)
    spec = {"type": "instanceReference", "instanceReference": info["instanceReference"]}
    assert (await _rpc(ws, "getModelInfo", {"specifier": spec, "throwIfNotFound": True}))["result"] == info
    counted = await _rpc(ws, "countTokens", {"specifier": spec, "inputString": "Hello world"})
    tokens = await _rpc(ws, "tokenize", {"specifier": spec, "inputString": "Hello world"})
    assert counted["result"]["tokenCount"] == len(tokens["result"]["tokens"]) > 0
    config = (await _rpc(ws, "getLoadConfig", {"specifier": spec}))["result"]
    assert {"key": "llm.load.contextLength", "value": 2048} in config["fields"]
    history = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]}
    formatted = (await _rpc(ws, "applyPromptTemplate", {"specifier": spec, "history": history,
                                                        "predictionConfigStack": {"layers": []}, "opts": {}}))
    rendered = await client.post("/apply-template", json={"messages": [{"role": "user", "content": "Hello"}]})
    assert formatted.get("result") == {"formatted": (await rendered.json())["prompt"]}, formatted
    # Another namespace lists no LLM; an endpoint not served is an rpcError naming it.
    assert (await _rpc(await _session(client, "embedding"), "listLoaded"))["result"] == []
    error = await _rpc(ws, "searchModels", {"searchTerm": "x"})
    assert error["type"] == "rpcError" and "searchModels" in error["error"]["title"]
    await ws.close()


async def test_respond_streams_fragments_and_ends_with_success(fake):
    client, serving = fake
    ws = await _session(client)
    fields = [{"key": "llm.prediction.maxPredictedTokens", "value": {"checked": True, "value": 50}},
              {"key": "llm.prediction.temperature", "value": 0.5},
              {"key": "llm.prediction.topPSampling", "value": {"checked": False, "value": 0.1}}]
    messages = await _channel(ws, _predict(fields))
    assert messages[-1] == {"type": "channelClose", "channelId": 1}
    fragments = [m["fragment"] for m in messages if m["type"] == "fragment"]
    # PredictionResult.content joins every fragment: the thinking inside its tags, then the answer.
    assert "".join(f["content"] for f in fragments) == "<think>\nhmm\n</think>Hello world"
    assert [f["reasoningType"] for f in fragments][0] == "reasoningStartTag"
    # lmstudio-js requires isStructural on every fragment (llmPredictionFragmentSchema) and leaves the structural
    # tags out of its reasoningContent / nonReasoningContent (OngoingPrediction.collect).
    assert [f["content"] for f in fragments if f["isStructural"]] == ["<think>", "</think>"]
    assert {f["reasoningType"] for f in fragments if f["content"] == "Hello world"} <= {"none"}
    success = messages[-2]
    assert success["type"] == "success" and success["modelInfo"]["identifier"] == "fake-model"
    stats = success["stats"]
    assert stats["stopReason"] == "eosFound"
    # Each fragment counts its tokens; the eos that ended the answer is in no fragment.
    assert stats["predictedTokensCount"] - 1 == sum(f["tokensCount"] for f in fragments) > 0
    assert stats["totalTokensCount"] == stats["promptTokensCount"] + stats["predictedTokensCount"]
    sent = serving.script.requests[-1]
    # The checked fields apply; the unchecked topPSampling leaves top_p at the default.
    assert (sent.max_tokens, round(sent.sampling.temperature, 3), sent.sampling.top_p) == (50, 0.5, 1.0)
    await ws.close()


async def test_a_structured_prediction_does_not_think(fake):
    """lmstudio-python's PredictionResult.parsed is json.loads of every fragment's text joined (lmstudio-js parses
    `content` too): thinking before the JSON made it unparsable. As on LM Studio, whose grammar covers the whole output
    (lmstudio-bug-tracker#575), a structured prediction runs with thinking off."""
    client, serving = fake
    serving.script.reply = '{"a": "x"}'
    structured = {"key": "llm.prediction.structured", "value": {"type": "json", "jsonSchema": {
        "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}}
    messages = await _channel(await _session(client), _predict([structured]))
    text = "".join(m["fragment"]["content"] for m in messages if m["type"] == "fragment")
    assert orjson.loads(text) == {"a": "x"}
    prompt = serving.tokenizer.decode(list(serving.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
    assert prompt.endswith("<think>\n\n</think>\n\n")


@pytest.mark.parametrize("key", ["maxPredictedTokens", "topPSampling", "repeatPenalty", "minPSampling"])
async def test_a_checkbox_set_to_false_is_off(fake, key):
    """lmstudio-python writes respond(config={"maxTokens": False}) as {"checked": true, "value": false}
    (_kv_config.py CheckboxField): the setting off (no limit, no top-p, ...), as lmstudio-js writes it unchecked. It was
    a channelError ('max_tokens must be at least 1, got 0', 'top_p: 0.0 is less than or equal to the minimum of 0',
    'repeat_penalty must be a number in (0, 10], got false')."""
    client, serving = fake
    field = {"key": f"llm.prediction.{key}", "value": {"checked": True, "value": False}}
    messages = await _channel(await _session(client), _predict([field]))
    assert [m["type"] for m in messages[-2:]] == ["success", "channelClose"], messages[-1]
    sampling = serving.script.requests[-1].sampling
    assert (sampling.top_p, round(sampling.repetition_penalty, 3)) == (1.0, 1.0)


async def test_complete_reads_the_prompt_raw(fake):
    """complete() sends its prompt as a user message with the SDK's complete-mode template: no chat template."""
    client, serving = fake
    template = {"jinjaPromptTemplate": {"bosToken": "", "eosToken": "", "inputConfig": {
        "messagesConfig": {"contentConfig": {"type": "string"}}, "useTools": False},
        "template": "{% for message in messages %}{{ message['content'] }}{% endfor %}"},
        "stopStrings": [], "type": "jinja"}
    layers = [{"layerName": "apiOverride", "config": {"fields": []}}, {"layerName": "completeModeFormatting",
              "config": {"fields": [{"key": "llm.prediction.promptTemplate", "value": template}]}}]
    messages = [{"role": "user", "content": [{"type": "text", "text": "Once upon"}]}]
    answer = await _channel(await _session(client), _predict(messages=messages, layers=layers))
    assert answer[-1]["type"] == "channelClose"
    tokens = (await (await client.post("/tokenize", json={"prompt": "Once upon"})).json())["tokens"]
    assert list(serving.script.requests[-1].prompt_token_ids) == tokens


async def test_tool_calls_and_their_results(fake):
    """act(): a tool call comes whole as toolCallGenerationEnd (arguments an object); the next turn's history carries
    the call (toolCallRequest part) and its result (a tool message's toolCallResult part) into the prompt."""
    client, serving = fake
    serving.script.reply = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>"
    tool = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {
        "a": {"type": "integer"}}}}}
    fields = [{"key": "llm.prediction.tools", "value": {"type": "toolArray", "tools": [tool]}}]
    ws = await _session(client)
    messages = await _channel(ws, _predict(fields))
    ends = [m for m in messages if m["type"] == "toolCallGenerationEnd"]
    assert [(e["toolCallRequest"]["name"], e["toolCallRequest"]["arguments"]) for e in ends] == [("add", {"a": 1})]
    assert messages[-2]["stats"]["stopReason"] == "toolCalls"
    call = ends[0]["toolCallRequest"]
    history = [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
               {"role": "assistant", "content": [{"type": "toolCallRequest", "toolCallRequest": call}]},
               {"role": "tool", "content": [{"type": "toolCallResult", "content": "RESULT-42",
                                             "toolCallId": call["id"]}]}]
    serving.script.reply = "Hello world"
    messages = await _channel(ws, _predict(fields, messages=history, channel_id=2))
    assert messages[-1]["type"] == "channelClose"
    prompt = serving.tokenizer.decode(list(serving.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
    assert "RESULT-42" in prompt and "<function=add>\n<parameter=a>\n1\n" in prompt


async def test_cancel_ends_with_user_stopped(fake):
    client, serving = fake
    serving.script.reply, serving.script.delay_s = "Hello world " * 40, 0.05
    ws = await _session(client)
    await ws.send_json(_predict())
    first = await ws.receive_json(timeout=10)
    assert first["message"]["type"] == "fragment"
    await ws.send_json({"type": "channelSend", "channelId": 1, "message": {"type": "cancel"}})
    while (message := await ws.receive_json(timeout=10))["type"] == "channelSend":
        last = message["message"]
    assert message["type"] == "channelClose"
    assert last["type"] == "success" and last["stats"]["stopReason"] == "userStopped"


@pytest.mark.parametrize("field, value, param", [
    ("llm.prediction.temperature", "hot", "llm.prediction.temperature"),
    ("llm.prediction.maxPredictedTokens", {"checked": True, "value": 0}, "llm.prediction.maxPredictedTokens"),
    ("llm.prediction.repeatPenalty", {"checked": True, "value": 20}, "llm.prediction.repeatPenalty"),
    ("llm.prediction.stopStrings", 5, "llm.prediction.stopStrings"),
], ids=["temperature", "max-tokens", "repeat-penalty", "stop"])
async def test_errors_name_the_sdk_fields(fake, field, value, param):
    """A prediction runs as an /api/v0 chat body; its errors name the config keys the SDK sent (and history.messages),
    never the chat fields it was translated into ('temperature', 'max_tokens', 'repeat_penalty', 'stop')."""
    client, _ = fake
    messages = await _channel(await _session(client), _predict([{"key": field, "value": value}]))
    title = messages[-1]["error"]["title"]
    assert messages[-1]["type"] == "channelError" and param in title, title


async def test_a_bad_role_names_the_history(fake):
    client, _ = fake
    history = [{"role": "robot", "content": [{"type": "text", "text": "x"}]}]
    messages = await _channel(await _session(client), _predict(messages=history))
    assert "'history.messages[0].role'" in messages[-1]["error"]["title"]


@pytest.mark.parametrize("create, words", [
    ({"type": "channelCreate", "endpoint": "getOrLoad", "channelId": 1,
      "creationParameter": {"identifier": "other-model"}}, "fake-model"),
    (_predict([{"key": "llm.prediction.promptTemplate", "value": {"type": "jinja", "jinjaPromptTemplate": {
        "template": "{{ messages }}"}}}]), "llm.prediction.promptTemplate"),
    (_predict(messages=[{"role": "user", "content": [{"type": "file", "fileType": "image"}]}]), "image"),
    (_predict([{"key": "llm.prediction.logProbs", "value": {"checked": True, "value": 3}}]), "logProbs"),
], ids=["another-model", "custom-template", "image", "logprobs-on"])
async def test_refusals_are_channel_errors(fake, create, words):
    client, _ = fake
    messages = await _channel(await _session(client), create)
    assert messages[-1]["type"] == "channelError" and words in orjson.dumps(messages[-1]["error"]).decode()


async def test_lmstudio_js_default_fields_are_served(fake):
    """lmstudio-js writes these for any respond() (llmPredictionConfigToKVConfig): unchecked checkboxes, its tool
    naming, llama.cpp's thread count; none of them is a refusal."""
    client, _ = fake
    fields = [{"key": "llm.prediction.llama.xtcProbability", "value": {"checked": False, "value": 0}},
              {"key": "llm.prediction.logProbs", "value": {"checked": False, "value": 0}},
              {"key": "llm.prediction.toolNaming", "value": "passThrough"},
              {"key": "llm.prediction.llama.cpuThreads", "value": 4},
              {"key": "llm.prediction.maxPredictedTokens", "value": {"checked": False, "value": 1}}]
    messages = await _channel(await _session(client), _predict(fields))
    assert [m["type"] for m in messages[-2:]] == ["success", "channelClose"]


async def test_a_plain_get_of_a_namespace_says_what_it_is(fake):
    client, _ = fake
    response = await client.get("/llm")
    error = (await response.json())["error"]
    assert (response.status, error["type"]) == (400, "invalid_request_error") and "websocket" in error["message"]


@pytest.mark.parametrize("endpoint, param, answer", [
    ("getOrLoad", {"identifier": "fake-model"}, "alreadyLoaded"),
    # Any name the other APIs take for the served model (openai_plan.served), as lms.llm("default") sends it.
    ("getOrLoad", {"identifier": "default"}, "alreadyLoaded"),
    ("getOrLoad", {"identifier": "fake-model:latest"}, "alreadyLoaded"),
    ("loadModel", {"modelKey": "fake-model", "identifier": None, "loadConfigStack": {"layers": []}}, "success"),
], ids=["get-or-load", "default", "latest", "load-new-instance"])
async def test_loading_the_served_model(fake, endpoint, param, answer):
    """lms.llm(key) (getOrLoad) and load_new_instance(key) (loadModel) of the served model answer its instance, as
    POST /api/v1/models/load does; loadModel was the channel's error."""
    client, _ = fake
    create = {"type": "channelCreate", "endpoint": endpoint, "channelId": 1, "creationParameter": param}
    messages = await _channel(await _session(client), create)
    assert messages[0]["type"] == answer and messages[0]["info"]["identifier"] == "fake-model"
    assert messages[-1]["type"] == "channelClose"


def test_a_history_tool_call_with_an_integer_past_64_bits_keeps_every_digit():
    """The SDK's toolCallRequest arguments as an OpenAI call's arguments string: json_out, as every gateway answer
    (orjson.dumps raised TypeError on 2^70: the prediction failed)."""
    from gateway.lmstudio_sdk_request import _tool_call

    call = _tool_call({"id": "c1", "name": "f", "arguments": {"n": 2 ** 70, "s": "x"}}, 0)
    assert call["function"]["arguments"] == '{"n":%d,"s":"x"}' % 2 ** 70
