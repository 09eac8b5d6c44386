"""Gateway <-> scheduler boundary: how many new calls the scheduler's gRPC server holds until its Python loop takes
them.

gRPC C-core keeps each incoming call in a pending queue until the application asks for the next one (grpc.aio takes
them one at a time); past `grpc.server.max_pending_requests` queued calls (default 1000) it cancels new ones with a
rising probability, and every one past `grpc.server.max_pending_requests_hard_limit` (default 3000): random early
detection, grpc src/core/server/server.h `pending_backlog_protector_`. The gateway opens one call per choice, so one
/v1/completions request of 1300 prompts (an lm-eval batch), or 1300 clients arriving at once, had ~25 of them
CANCELLED and the whole request answered 500. The scheduler has its own admission (queue depth, context, seats);
the transport's backlog must not refuse before it.

Shared by scheduler/server.py and the fake scheduler's server (gateway/fake_scheduler.py).
"""
MAX_PENDING_CALLS = 1 << 20


def backlog_options(max_pending: int = MAX_PENDING_CALLS) -> list:
    """Server options: hold up to `max_pending` calls the application has not taken yet, refusing none before."""
    return [("grpc.server.max_pending_requests", max_pending),
            ("grpc.server.max_pending_requests_hard_limit", max_pending)]
