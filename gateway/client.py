"""Gateway process: grpc.aio client to the scheduler's Serving service, gRPC status -> typed API errors."""
from __future__ import annotations

import logging
from typing import AsyncIterator, Optional

import grpc

from gateway.errors import (ApiError, ContextLengthExceeded, InternalError, InvalidRequest, Overloaded,
                            Timeout, Unavailable)
from proto import ADMITTED_METADATA_KEY, CONTEXT_METADATA_KEY, pb, pb_grpc
from proto.keepalive import KEEPALIVE_TIME_MS, KEEPALIVE_TIMEOUT_MS, client_options

_INFO_TIMEOUT_S = 5.0
_FINISH_TIMEOUT_S = 1.0
# gRPC backs off between reconnects to an unreachable scheduler (1 s growing 1.6x up to 120 s), and a call made while
# it waits fails at once: after a scheduler restart every request was a 503 until the next attempt (11 s after a 30 s
# outage, measured; up to 2 minutes after a long one). Retrying every second at most is no load on a scheduler.
# The subchannel pool is the channel's own: gRPC's default process-wide pool hands a new channel the connection state
# of any earlier channel to the same address, so a client made for a scheduler now listening where a dead one was
# (a restart in place; in the tests, a fake scheduler on a reused port) failed at once with UNAVAILABLE "Connection
# refused" until that state's backoff ran out (tests/unit/test_gateway_client_channel.py).
_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.use_local_subchannel_pool", 1),
]
log = logging.getLogger("sparkinfer.gateway")


def _metadata_value(call_or_error, key: str) -> Optional[str]:
    try:
        metadata = call_or_error.trailing_metadata() or ()
    except Exception:  # noqa: BLE001 - metadata is best effort on a failed call
        return None
    for item_key, value in metadata:
        if item_key.lower() == key:
            return value if isinstance(value, str) else value.decode()
    return None


def _overloaded(error, details: str) -> ApiError:
    retry = _metadata_value(error, "retry-after")
    return Overloaded(details or "the server is overloaded: waiting queue is full, retry later",
                      retry_after=int(float(retry)) if retry else 1)


def _invalid(error, details: str) -> ApiError:
    counts = _metadata_value(error, CONTEXT_METADATA_KEY)
    if counts:
        ctx, num_prompt, max_tokens = (int(value) for value in counts.split(","))
        return ContextLengthExceeded(details, param="max_tokens" if max_tokens else "messages").counts(
            ctx, num_prompt, max_tokens or None)
    if "context" in details.lower():
        return ContextLengthExceeded(details, param="messages")
    return InvalidRequest(details or "the scheduler rejected the request")


# gRPC status of a failed scheduler call -> the API error the client sees.
_BY_STATUS = {
    grpc.StatusCode.RESOURCE_EXHAUSTED: _overloaded,
    grpc.StatusCode.INVALID_ARGUMENT: _invalid,
    grpc.StatusCode.UNAVAILABLE:
        lambda error, details: Unavailable(f"the model server is unavailable: {details or 'scheduler unreachable'}"),
    grpc.StatusCode.FAILED_PRECONDITION:
        lambda error, details: Unavailable(f"the model server is not ready: {details}"),
    grpc.StatusCode.DEADLINE_EXCEEDED:
        lambda error, details: Timeout(f"the scheduler did not answer in time: {details}"),
}


def map_rpc_error(error: grpc.aio.AioRpcError) -> ApiError:
    """The API error a failed scheduler call means for the client."""
    code, details = error.code(), error.details() or ""
    make = _BY_STATUS.get(code)
    if make is None:
        return InternalError(f"scheduler error ({code.name}): {details}")
    return make(error, details)


class SchedulerClient:
    """One channel to one scheduler; every method raises ApiError instead of grpc errors."""

    def __init__(self, address: str, keepalive_time_ms: int = KEEPALIVE_TIME_MS,
                 keepalive_timeout_ms: int = KEEPALIVE_TIMEOUT_MS):
        self.address = address
        # Pinged, so that a scheduler that stops answering without closing the connection fails the calls on it
        # (503) instead of leaving them waiting forever (proto/keepalive.py).
        options = _CHANNEL_OPTIONS + client_options(keepalive_time_ms, keepalive_timeout_ms)
        self._channel = grpc.aio.insecure_channel(address, options=options)
        self._stub = pb_grpc.ServingStub(self._channel)
        # Bumped whenever a call finds the scheduler unreachable or without a live worker: the engine may come back
        # with another model card (a checkpoint, a KV pool that caps the context), so the card is fetched again.
        self.epoch = 0

    def failed(self, exc: grpc.aio.AioRpcError) -> ApiError:
        """map_rpc_error, counting an outage (a new epoch)."""
        # A context the scheduler refuses may be smaller than the card's: a worker restarted with a smaller KV pool
        # between two requests of this gateway (no outage seen), so the card is fetched again too.
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION) or \
                _metadata_value(exc, CONTEXT_METADATA_KEY):
            self.epoch += 1
        return map_rpc_error(exc)

    async def close(self) -> None:
        """Closes the gRPC channel."""
        await self._channel.close()

    async def info(self, timeout: float = _INFO_TIMEOUT_S) -> "pb.InfoResponse":
        """The scheduler's model card (pb.InfoResponse); a failed call raises its ApiError (map_rpc_error)."""
        try:
            return await self._stub.Info(pb.InfoRequest(), timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise self.failed(exc) from exc

    async def load(self, timeout: float = 2.0) -> "pb.LoadResponse":
        """The scheduler's pb.LoadResponse (timeout s); no live worker counts an outage (a new epoch); a failed call
        raises its ApiError."""
        try:
            load = await self._stub.Load(pb.LoadRequest(), timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise self.failed(exc) from exc
        if not load.worker_alive:
            self.epoch += 1
        return load

    async def reset_prefix_cache(self, timeout: float = 5.0) -> "pb.ResetPrefixCacheResponse":
        """ResetPrefixCache (timeout s): pb.ResetPrefixCacheResponse; a failed call raises its ApiError."""
        try:
            return await self._stub.ResetPrefixCache(pb.ResetPrefixCacheRequest(), timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise self.failed(exc) from exc

    def generate(self, request: "pb.GenerateRequest") -> "GenerateStream":
        """Starts a Generate call for `request`; its messages are read through the GenerateStream."""
        return GenerateStream(self._stub.Generate(request), request.req_id, self)

    async def finish(self, req_id: str, finish_reason: str, timeout: float = _FINISH_TIMEOUT_S) -> bool:
        """Tells the scheduler the gateway ended req_id itself (finish_reason "stop": a stop string matched), so it
        frees the request and counts it under that reason, not "abort". Best effort: False when the scheduler
        did not take it (already finished, unreachable, or an older scheduler); the cancel that follows frees it."""
        try:
            reply = await self._stub.Finish(pb.FinishRequest(req_id=req_id, finish_reason=finish_reason),
                                            timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            log.debug("Finish(%s, %s) not taken: %s", req_id, finish_reason, exc.code().name)
            return False
        return reply.finished


class GenerateStream:
    """One Generate call: read messages with `next()`; `cancel()` aborts the request in the scheduler."""

    def __init__(self, call, req_id: str = "", client: Optional[SchedulerClient] = None):
        self._call = call
        self.req_id = req_id
        self._client = client

    async def next(self) -> Optional["pb.GenerateResponse"]:
        """The next message, or None when the stream ended normally."""
        try:
            message = await self._call.read()
        except grpc.aio.AioRpcError as exc:
            raise (self._client.failed(exc) if self._client is not None else map_rpc_error(exc)) from exc
        if message is grpc.aio.EOF:
            return None
        return message

    async def admitted(self) -> bool:
        """Whether the scheduler said it admitted the request (its initial metadata, sent before any token). False
        when it refused it (the error comes with next()), or when it says so only with the first token."""
        try:
            metadata = await self._call.initial_metadata()
        except grpc.aio.AioRpcError:
            return False
        return any(key == ADMITTED_METADATA_KEY for key, _ in metadata or ())

    def cancel(self) -> None:
        """Cancels the Generate call; the scheduler frees the request's seat."""
        self._call.cancel()

    async def finish(self, finish_reason: str) -> bool:
        """The gateway ends this request itself (see SchedulerClient.finish); call it before cancel()."""
        if self._client is None:
            return False
        return await self._client.finish(self.req_id, finish_reason)

    async def __aiter__(self) -> AsyncIterator["pb.GenerateResponse"]:
        while True:
            message = await self.next()
            if message is None:
                return
            yield message
