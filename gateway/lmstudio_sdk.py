"""Gateway process: LM Studio's SDK websocket API, what lmstudio-python and lmstudio-js speak on LM Studio's port.

The SDK probes GET /lmstudio-greeting for {"lmstudio": true}, then opens a websocket per namespace (ws://host/llm,
/system, /embedding, ...; lmstudio-python sync_api.py), authenticates ({authVersion, clientIdentifier,
clientPasskey} -> {success: true}) and multiplexes `rpcCall` ({endpoint, callId, parameter} -> rpcResult /
rpcError) and channels (`channelCreate` {endpoint, channelId, creationParameter} -> channelSend messages, then
channelClose; channelError on failure; the client's channelSend {type: cancel} stops a prediction). Served: the
model's info, load config, tokenize / countTokens, applyPromptTemplate, get-or-load and load of the served model,
unload (as /api/v1's), and `predict` (gateway.lmstudio_sdk_predict); the download and file APIs are an rpcError
naming the endpoint.
"""
from __future__ import annotations

import asyncio
import logging
import time

import orjson
from aiohttp import WSCloseCode, WSMsgType, web

from gateway.chat_prompt import prefill_final_assistant
from gateway.config import GatewayConfig
from gateway.control_tokens import unmark
from gateway.engine import Engine
from gateway import json_out
from gateway.errors import ApiError, InvalidRequest, NotFound
from gateway.lmstudio_sdk_info import download_info, instance_info, load_config, matches
from gateway.lmstudio_sdk_predict import PredictRun, start_prediction
from gateway.lmstudio_sdk_request import chat_body
from gateway.offload import run_cpu
from gateway.openai_routes import rendered_messages
from gateway.route_hints import WEBSOCKET_ROUTE

log = logging.getLogger(__name__)

# The namespaces the SDK opens a websocket for (lmstudio-python ClientSession.API_NAMESPACE values).
NAMESPACES = ("llm", "embedding", "system", "diagnostics", "files", "repository", "plugins", "runtime")


def _is_id(value) -> bool:
    """Whether value can be a call's or channel's id: the SDKs number them (lmstudio-python, lmstudio-js)."""
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _channel_id(value):
    """value, a channel's id; InvalidRequest for one of another JSON type."""
    if not _is_id(value):
        raise InvalidRequest("channelId must be an integer or a string", param="channelId")
    return value


def _object(value, name: str) -> dict:
    """An RPC's parameter or a channel's creationParameter: an object ({} where absent or null); InvalidRequest
    naming it otherwise."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequest(f"{name} must be an object", param=name)
    return value


def _error(exc: BaseException) -> dict:
    """LM Studio's serialized error ({title, ...}) that the SDK raises as LMStudioServerError(title)."""
    if isinstance(exc, ApiError):
        return {"title": exc.message}
    return {"title": f"internal error: {exc!r}"}


class SdkSession:
    """One namespace websocket: its RPCs answered in turn, each channel run as a task of its own."""

    def __init__(self, engine: Engine, namespace: str, ws: web.WebSocketResponse):
        self.engine, self.namespace, self.ws = engine, namespace, ws
        self.channels: dict = {}
        self.lock = asyncio.Lock()
        self.stopping = False   # the gateway stops: close once nothing runs (LMStudioSdkRoutes.shutdown)
        self.closing = None     # the task that closes the socket once the last channel ends while stopping

    async def send(self, message: dict) -> None:
        """One JSON message; the channel tasks and the RPCs share the socket."""
        async with self.lock:
            if not self.ws.closed:
                await self.ws.send_str(json_out.dumps(message).decode())

    async def handle(self, message: dict) -> None:
        """One client message. A field of the wrong JSON type is the call's rpcError or the channel's channelError
        naming it (never an internal error, nor the socket closed), and the session goes on."""
        kind = message.get("type")
        if kind == "rpcCall":
            call_id = message.get("callId")
            try:
                result = await self.rpc(message.get("endpoint"), _object(message.get("parameter"), "parameter"))
                await self.send({"type": "rpcResult", "callId": call_id, "result": result})
            except Exception as exc:  # noqa: BLE001 - every failure is the caller's rpcError
                await self.send({"type": "rpcError", "callId": call_id, "error": _error(exc)})
        elif kind == "channelCreate":
            channel_id = message.get("channelId")
            try:
                self.open(message.get("endpoint"), _channel_id(channel_id), message.get("creationParameter"))
            except ApiError as exc:
                await self.send({"type": "channelError", "channelId": channel_id, "error": _error(exc)})
        elif kind == "channelSend":
            channel_id, inner = message.get("channelId"), message.get("message")
            entry = self.channels.get(channel_id) if _is_id(channel_id) else None
            if entry is not None and entry[1] is not None and isinstance(inner, dict) and inner.get("type") == "cancel":
                entry[1].cancel()

    def open(self, endpoint, channel_id, param) -> None:
        """Starts a channel's task; its id is free again once the task ended."""
        if channel_id in self.channels:
            raise InvalidRequest(f"channel {channel_id} is already open", param="channelId")
        param = _object(param, "creationParameter")
        task = asyncio.ensure_future(self.channel(endpoint, channel_id, param))
        entry = self.channels[channel_id] = [task, None]
        task.add_done_callback(lambda _: self._ended(channel_id, entry))

    def _ended(self, channel_id, entry) -> None:
        """A channel's task ended: its id is free again; the last one of a stopping gateway closes the session."""
        if self.channels.get(channel_id) is entry:
            self.channels.pop(channel_id)
        if self.stopping and not self.channels:
            # held (the loop keeps only weak references to tasks: asyncio docs, create_task)
            self.closing = asyncio.ensure_future(self.close_if_idle())

    async def close_if_idle(self) -> None:
        """While the gateway stops: the socket closed with 1001 "going away" (RFC 6455 7.4.1) once no channel runs,
        so that its handler ends and the drain does not wait for a client that only holds its session open."""
        if self.stopping and not self.channels and not self.ws.closed:
            await self.ws.close(code=WSCloseCode.GOING_AWAY, message=b"the server is shutting down")

    async def rpc(self, endpoint, param):
        """An RPC's result; raises the ApiError its rpcError carries."""
        card, name = await self.engine.card(), await self.engine.served_name()
        specifier = param.get("specifier") if isinstance(param, dict) else None
        if endpoint == "listLoaded":
            loaded = self.namespace == "llm" and await self.engine.model_listed()
            return [instance_info(card, name, each) for each in (name, *card.served_aliases)] if loaded else []
        if endpoint == "listDownloadedModels":
            return [download_info(card, name)]
        if endpoint == "getModelInfo":
            self._check(specifier, card, name)
            return instance_info(card, name)
        if endpoint == "getLoadConfig":
            self._check(specifier, card, name)
            return load_config(card)
        if endpoint in ("tokenize", "countTokens"):
            self._check(specifier, card, name)
            text = param.get("inputString")
            if not isinstance(text, str):
                raise InvalidRequest("inputString must be a string", param="inputString")
            ids = card.encode(text)
            return {"tokens": ids} if endpoint == "tokenize" else {"tokenCount": len(ids)}
        if endpoint == "applyPromptTemplate":
            self._check(specifier, card, name)
            body = prefill_final_assistant(chat_body(param, name))
            return {"formatted": unmark(await run_cpu(rendered_messages, body, card))}
        if endpoint == "unloadModel":
            self._check({"type": "query", "query": {"identifier": (param or {}).get("identifier")}}, card, name)
            self.engine.load_state.touch(0)   # as POST /api/v1/models/unload: listed unloaded until used again
            return None
        raise NotFound(f"the LM Studio SDK endpoint {self.namespace}.{endpoint} is not served here: this server "
                       "serves one model fixed at start (predict, model info, tokenize, load / unload of it)")

    def _check(self, specifier, card, name) -> None:
        if self.namespace != "llm" or not matches(specifier, card, name):
            raise NotFound(f"No loaded model satisfies the query; this server serves '{name}'", param="specifier")

    async def channel(self, endpoint, channel_id, param) -> None:
        """Runs one channel to its close (or its channelError)."""
        try:
            if endpoint == "predict":
                await self.predict(channel_id, param)
            elif endpoint in ("getOrLoad", "loadModel") and self.namespace == "llm":
                await self.load(channel_id, endpoint, param if isinstance(param, dict) else {})
            else:
                raise NotFound(f"the LM Studio SDK channel {self.namespace}.{endpoint} is not served here: the "
                               "model is fixed when the server starts")
            await self.send({"type": "channelClose", "channelId": channel_id})
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is the channel's channelError
            if not isinstance(exc, ApiError):
                log.exception("LM Studio SDK channel %s failed", endpoint)
            await self.send({"type": "channelError", "channelId": channel_id, "error": _error(exc)})

    async def load(self, channel_id, endpoint: str, param: dict) -> None:
        """getOrLoad (lms.llm(key)) and loadModel (load_new_instance) of the served model: the instance in memory,
        as POST /api/v1/models/load answers for it, listed loaded again after an unload; a loadModel naming another
        instance identifier, or another model, is the channel's error (the model is fixed at start)."""
        card, name = await self.engine.card(), await self.engine.served_name()
        key = param.get("identifier") if endpoint == "getOrLoad" else param.get("modelKey")
        self._check({"type": "query", "query": {"identifier": key}}, card, name)
        if endpoint == "loadModel" and param.get("identifier") not in (None, name):
            raise InvalidRequest(f"a new instance '{param['identifier']}' cannot be loaded: this server runs one "
                                 f"instance of '{name}', fixed at start", param="identifier")
        await self.engine.check_loaded()
        self.engine.load_state.touch(None)
        kind = "alreadyLoaded" if endpoint == "getOrLoad" else "success"
        await self.send({"type": "channelSend", "channelId": channel_id,
                         "message": {"type": kind, "info": instance_info(card, name)}})

    async def predict(self, channel_id, param) -> None:
        """The predict channel: fragments, tool calls and `success` (gateway.lmstudio_sdk_predict)."""
        received = time.monotonic()
        card, name = await self.engine.card(), await self.engine.served_name()
        if self.namespace != "llm":
            raise NotFound(f"predict is an llm channel, not {self.namespace}'s")
        self._check((param or {}).get("modelSpecifier") if isinstance(param, dict) else None, card, name)
        gen, shaper, fields = await start_prediction(self.engine, param, card, name)
        self.channels[channel_id][1] = gen

        async def send(message: dict) -> None:
            await self.send({"type": "channelSend", "channelId": channel_id, "message": message})

        await PredictRun(gen, shaper, card, send).run(received, instance_info(card, name), load_config(card), fields)

    async def close(self) -> None:
        """Cancels the channels still running (the client left)."""
        for task, _ in list(self.channels.values()):
            task.cancel()


class LMStudioSdkRoutes:
    """GET /lmstudio-greeting and the SDK's namespace websockets."""

    def __init__(self, engine: Engine, config: GatewayConfig):
        self.engine, self.config = engine, config
        self.sessions: set = set()

    async def shutdown(self, app: web.Application) -> None:
        """aiohttp's on_shutdown, before it waits for the handlers: every session closes once nothing runs in it
        (aiohttp's graceful shutdown closes websockets here; each handler otherwise ran until its client left)."""
        for session in list(self.sessions):
            session.stopping = True
            await session.close_if_idle()

    def register(self, app: web.Application) -> None:
        """Adds the greeting probe and one websocket route per SDK namespace."""
        app.router.add_get("/lmstudio-greeting", self.greeting)
        app.on_shutdown.append(self.shutdown)
        for namespace in NAMESPACES:
            # Named WEBSOCKET_ROUTE...: a plain HTTP request is never one of these (gateway/route_hints.py).
            app.router.add_get(f"/{namespace}", self.websocket, name=f"{WEBSOCKET_ROUTE}lmstudio-{namespace}")

    async def greeting(self, request: web.Request) -> web.Response:
        """The SDK's probe: {"lmstudio": true} (lmstudio-python json_api.py _check_probe_response)."""
        return web.json_response({"lmstudio": True})

    async def websocket(self, request: web.Request) -> web.WebSocketResponse:
        """One SDK session: the auth message first, then RPCs and channels until the client closes."""
        ws = web.WebSocketResponse(heartbeat=self.config.sse_keepalive_s or None, max_msg_size=64 * 2 ** 20)
        if not ws.can_prepare(request).ok:
            # A plain GET got aiohttp's own 400 ('No WebSocket UPGRADE hdr'), typed server_error.
            raise InvalidRequest(f"{request.path} is LM Studio's SDK websocket (lmstudio-python, lmstudio-js): connect "
                                 "with a websocket upgrade")
        await ws.prepare(request)
        session = SdkSession(self.engine, request.path.strip("/"), ws)
        self.sessions.add(session)
        authed = False
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                try:
                    message = orjson.loads(msg.data)
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(message, dict):
                    continue
                if not authed:
                    authed = "authVersion" in message
                    await session.send({"success": True} if authed else {
                        "success": False, "error": {"title": "the first message must be the SDK's auth message"}})
                    continue
                await session.handle(message)
                await session.close_if_idle()
        finally:
            self.sessions.discard(session)
            await session.close()
        return ws
