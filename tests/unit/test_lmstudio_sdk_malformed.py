"""LM Studio SDK websocket (fake scheduler): a message whose fields are of the wrong JSON type is answered with its
rpcError / channelError naming the field, and the session goes on serving. Before, an RPC parameter that was no
object was an rpcError "internal error: AttributeError(...)", and a channelId that was a list or an object closed
the socket (TypeError: unhashable, raised out of the websocket handler, whose 500 aiohttp then wrote onto the
upgraded connection); a channel id still open, reused, lost its bookkeeping ("internal error: KeyError")."""
import pytest

from tests.unit.test_lmstudio_sdk import _channel, _predict, _session

SPEC = {"type": "query", "query": {"identifier": "fake-model"}}
NOT_OBJECTS = ["x", 0, 2.5, True, [], [1]]


async def _answer(ws, message) -> dict:
    """The first answer to message, then checks the session still serves an RPC."""
    await ws.send_json(message)
    answer = await ws.receive_json(timeout=10)
    await ws.send_json({"type": "rpcCall", "endpoint": "getModelInfo", "callId": 99, "parameter": {"specifier": SPEC}})
    probe = await ws.receive_json(timeout=10)
    assert probe["type"] == "rpcResult" and probe["callId"] == 99, probe
    return answer


@pytest.mark.parametrize("endpoint", ["tokenize", "countTokens", "unloadModel", "getModelInfo", "applyPromptTemplate"])
@pytest.mark.parametrize("parameter", NOT_OBJECTS, ids=repr)
async def test_an_rpc_parameter_that_is_no_object_is_its_rpc_error(fake, endpoint, parameter):
    client, _ = fake
    ws = await _session(client)
    answer = await _answer(ws, {"type": "rpcCall", "endpoint": endpoint, "callId": 5, "parameter": parameter})
    title = answer["error"]["title"]
    assert answer["type"] == "rpcError" and answer["callId"] == 5, answer
    assert "parameter" in title and "must be an object" in title and "internal error" not in title, title


@pytest.mark.parametrize("channel_id", [[], [1], {}, {"a": 1}, None, 1.5, True], ids=repr)
@pytest.mark.parametrize("endpoint", ["predict", "getOrLoad"])
async def test_a_channel_id_that_is_no_number_or_string_is_a_channel_error(fake, channel_id, endpoint):
    client, fake_serving = fake
    ws = await _session(client)
    create = {**_predict(), "endpoint": endpoint, "channelId": channel_id}
    answer = await _answer(ws, create)
    assert answer == {"type": "channelError", "channelId": channel_id, "error": {
        "title": "channelId must be an integer or a string"}}, answer
    assert fake_serving.script.requests == []
    # A channelSend to such an id is ignored, and the session goes on.
    await ws.send_json({"type": "channelSend", "channelId": channel_id, "message": {"type": "cancel"}})
    await ws.send_json({"type": "channelSend", "channelId": 1, "message": "cancel"})
    assert (await _answer(ws, {"type": "rpcCall", "endpoint": "listLoaded", "callId": 3}))["type"] == "rpcResult"


@pytest.mark.parametrize("param", NOT_OBJECTS, ids=repr)
@pytest.mark.parametrize("endpoint", ["predict", "getOrLoad", "loadModel"])
async def test_a_creation_parameter_that_is_no_object_is_a_channel_error(fake, param, endpoint):
    client, fake_serving = fake
    ws = await _session(client)
    answer = await _answer(ws, {"type": "channelCreate", "endpoint": endpoint, "channelId": 4,
                                "creationParameter": param})
    assert answer == {"type": "channelError", "channelId": 4, "error": {
        "title": "creationParameter must be an object"}}, answer
    assert fake_serving.script.requests == []


async def test_a_channel_id_still_open_is_refused_and_the_open_channel_runs_on(fake):
    client, fake_serving = fake
    ws = await _session(client)
    fake_serving.script.delay_s = 0.1
    await ws.send_json(_predict(channel_id=8))
    await ws.send_json(_predict(channel_id=8))
    messages = [await ws.receive_json(timeout=10)]
    while messages[-1]["type"] != "channelClose":
        messages.append(await ws.receive_json(timeout=10))
    assert {"type": "channelError", "channelId": 8, "error": {"title": "channel 8 is already open"}} in messages
    assert [m["message"]["type"] for m in messages if m["type"] == "channelSend"][-1] == "success"
    assert len(fake_serving.script.requests) == 1
    # Once closed, the id may be used again.
    assert (await _channel(ws, _predict(channel_id=8)))[-1]["type"] == "channelClose"
