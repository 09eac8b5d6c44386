"""Gateway <-> scheduler boundary: the HTTP/2 keepalive both ends of the gRPC connection agree on.

Without it a peer that stops answering without closing its connection (its loop stuck, its process stopped, its host
cut off) went unnoticed: a stream waits for data and never writes, so TCP never learns that the peer is gone. Each
end pings every `time_ms` and drops the connection when a ping is not answered within `timeout_ms`, also with no call
open and however long no data came. The gateway: every call on it fails UNAVAILABLE (a 503 to the client) and the next
call reconnects. The scheduler: every call on it is cancelled, so the requests of a gateway that is gone free their
seats, KV blocks and places in the queue (they ran on to max_tokens, or waited, for a client that never reads them).
Each end also takes the other's pings however long its streams stay silent (a request queued for minutes sends
nothing): gRPC's server default sends GOAWAY "too_many_pings" to a client that pings more than every 5 minutes
without data.

Shared by gateway/client.py (client_options) and scheduler/server.py (server_options).
"""
KEEPALIVE_TIME_MS = 10_000
KEEPALIVE_TIMEOUT_MS = 5_000


def client_options(time_ms: int = KEEPALIVE_TIME_MS, timeout_ms: int = KEEPALIVE_TIMEOUT_MS) -> list:
    """Channel options of the gateway's side: it pings as below."""
    return _pinging(time_ms, timeout_ms)


def server_options(time_ms: int = KEEPALIVE_TIME_MS, timeout_ms: int = KEEPALIVE_TIMEOUT_MS) -> list:
    """Server options of the scheduler's side: it pings as below, and takes a client's pings every time_ms (or more
    often, to half of it) without data."""
    return _pinging(time_ms, timeout_ms) + [
        ("grpc.http2.min_recv_ping_interval_without_data_ms", time_ms // 2),
        ("grpc.http2.min_ping_interval_without_data_ms", time_ms // 2),
        ("grpc.http2.max_ping_strikes", 0)]


def _pinging(time_ms: int, timeout_ms: int) -> list:
    """A ping every time_ms, also with no call open and however long no data came; a ping not answered within
    timeout_ms (gRPC's own ping timeout, 60 s by default, governs one already in flight) drops the connection."""
    return [("grpc.keepalive_time_ms", time_ms), ("grpc.keepalive_timeout_ms", timeout_ms),
            ("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.max_pings_without_data", 0),
            ("grpc.http2.min_time_between_pings_ms", time_ms), ("grpc.http2.ping_timeout_ms", timeout_ms)]
