"""Unit tests: a stopping gateway (SIGTERM, Ctrl-C under make run) closes the LM Studio SDK's websockets once they
have nothing running, with 1001 "going away" (RFC 6455 section 7.4.1: "an endpoint is going away, such as a server
going down"), in aiohttp's on_shutdown as its docs' graceful shutdown closes websockets (docs.aiohttp.org,
web_advanced.html, "Graceful shutdown"). aiohttp waits for every handler before it stops, and an SDK session's
handler runs until its client closes: one idle lmstudio-python client held `make run`'s stop for 20.5 s (measured
in session 31: Ctrl-C at 18:10:48.8, the gateway's drain over at 18:11:09.3, when the client gave up), and a
client that stays would hold it for the whole drain grace (30 s). A prediction still running is served to its
end first, as a request in flight is."""
import asyncio

from aiohttp import WSCloseCode, WSMsgType

from tests.unit.test_lmstudio_sdk import _predict, _rpc, _session


async def _closed(ws, timeout=5.0):
    """The close code of the server's close frame (the client's close_code may already read 1006 for a socket
    whose transport closed before the frame was read)."""
    message = await ws.receive(timeout=timeout)
    assert message.type == WSMsgType.CLOSE, message
    return message.data


async def test_an_idle_session_is_closed_when_the_gateway_stops(fake):
    client, _ = fake
    ws = await _session(client)
    assert (await _rpc(ws, "listLoaded"))["type"] == "rpcResult"
    other = await _session(client, "system")
    await asyncio.wait_for(client.server.app.shutdown(), 5)
    assert await _closed(ws) == await _closed(other) == WSCloseCode.GOING_AWAY


async def test_a_running_prediction_ends_before_its_session_closes(fake):
    client, serving = fake
    serving.script.reply, serving.script.delay_s = "Hello world " * 10, 0.02
    ws = await _session(client)
    await ws.send_json(_predict())
    assert (await ws.receive_json(timeout=10))["message"]["type"] == "fragment"
    await asyncio.wait_for(client.server.app.shutdown(), 5)
    while (message := await ws.receive_json(timeout=10))["type"] == "channelSend":
        last = message["message"]
    assert message["type"] == "channelClose" and last["type"] == "success"
    assert await _closed(ws) == WSCloseCode.GOING_AWAY
