"""Gateway <-> scheduler boundary: the HTTP/2 keepalive both ends of the gRPC connection agree on.

Without it a scheduler that stops answering without closing its connection (its loop stuck, its process stopped, its
host cut off) left every call waiting forever: a stream waits for data and never writes, so TCP never learns that
the peer is gone. The gateway pings every `time_ms` and drops the connection when a ping is not answered within
`timeout_ms` (every call on it fails UNAVAILABLE, a 503 to the client, and the next call reconnects). The scheduler
must accept those pings however long its streams stay silent (a request queued for minutes sends nothing): gRPC's
server default sends GOAWAY "too_many_pings" to a client that pings more than every 5 minutes without data.

Shared by gateway/client.py (the pinging side) and scheduler/server.py (the side that permits it).
"""
KEEPALIVE_TIME_MS = 10_000
KEEPALIVE_TIMEOUT_MS = 5_000


def client_options(time_ms: int = KEEPALIVE_TIME_MS, timeout_ms: int = KEEPALIVE_TIMEOUT_MS) -> list:
    """Channel options of the pinging side: every time_ms, also with no call open and however long no data came."""
    return [("grpc.keepalive_time_ms", time_ms), ("grpc.keepalive_timeout_ms", timeout_ms),
            ("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.max_pings_without_data", 0),
            ("grpc.http2.min_time_between_pings_ms", time_ms), ("grpc.http2.ping_timeout_ms", timeout_ms)]


def server_options(time_ms: int = KEEPALIVE_TIME_MS) -> list:
    """Server options that take a client's pings every time_ms (or more often, to half of it) without data."""
    return [("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", time_ms // 2),
            ("grpc.http2.min_ping_interval_without_data_ms", time_ms // 2),
            ("grpc.http2.max_ping_strikes", 0)]
