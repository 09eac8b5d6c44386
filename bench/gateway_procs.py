"""Bench helper (child processes of bench/gateway_load.py): the fake scheduler as a fast token source, and the gateway
(optionally under cProfile), each its own process so that the gateway's CPU time is its own; and DirectClient, the
same token source inside the gateway's process without gRPC (gateway_load.py --in-process).

Run: python -m bench.gateway_procs scheduler PORT | python -m bench.gateway_procs gateway PORT SCHEDULER_ADDR [PROF]
"""
import asyncio
import cProfile
import os
import signal
import sys

REPLY = "Hello world, this is a test. The quick brown fox jumps over the lazy dog. 1, 2, 3, 4, 5, 6. "
MAX_CONTEXT_LEN = 1 << 20


def reply_ids(tokenizer, num_tokens: int = 4096) -> list:
    """num_tokens ids of REPLY repeated (never the eos: every request runs to its max_tokens)."""
    ids = tokenizer.encode(REPLY).ids
    return (ids * (num_tokens // len(ids) + 1))[:num_tokens]


async def serve_scheduler(port: int) -> None:
    """gateway.fake_scheduler's FakeServing on 127.0.0.1:port, every token at once (no delay), one per message as the
    scheduler sends a decode step's token."""
    import grpc

    from gateway.fake_scheduler import NO_REUSEPORT
    from proto import pb_grpc

    fake = direct_fake()
    server = grpc.aio.server(options=NO_REUSEPORT)
    pb_grpc.add_ServingServicer_to_server(fake, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(None)


class _Discard(list):
    def append(self, item) -> None:
        pass


def direct_fake():
    """FakeServing scripted as serve_scheduler's."""
    from gateway.fake_scheduler import FakeServing, build_tokenizer

    fake = FakeServing(build_tokenizer(), max_context_len=MAX_CONTEXT_LEN)
    fake.script.token_ids = reply_ids(fake.tokenizer)
    fake.max_num_seqs = 1024
    # Not kept: Script.requests would grow by one GenerateRequest a call for the whole run.
    fake.script.requests = _Discard()
    return fake


class DirectClient:
    """gateway.client.SchedulerClient's methods the generation routes call, answered by a FakeServing in this process:
    each Generate message is one read that yields to the loop once, as a network read does."""

    def __init__(self, fake):
        self.fake, self.epoch = fake, 0

    async def info(self, timeout: float = 0):
        return await self.fake.Info(None, None)

    async def load(self, timeout: float = 0):
        return await self.fake.Load(None, None)

    def generate(self, request):
        from gateway.client import GenerateStream

        return GenerateStream(_DirectCall(self.fake, request), request.req_id)

    async def finish(self, req_id: str, finish_reason: str, timeout: float = 0) -> bool:
        return True

    async def close(self) -> None:
        pass


class _DirectCall:
    def __init__(self, fake, request):
        self._messages = fake._messages(request, fake.script.token_ids, fake.script)

    async def initial_metadata(self):
        from proto import ADMITTED_METADATA_KEY

        return ((ADMITTED_METADATA_KEY, "1"),)

    async def read(self):
        import grpc

        await asyncio.sleep(0)
        try:
            return await self._messages.__anext__()
        except StopAsyncIteration:
            return grpc.aio.EOF

    def cancel(self) -> None:
        pass


def serve_gateway(port: int, scheduler_addr: str, prof_path: str = "") -> None:
    """gateway.app.main on port (its defaults: access log on); with prof_path, under cProfile, the
    stats written there when it stops (SIGINT / SIGTERM: its drain, then exit)."""
    os.environ.update(SPARKINFER_PORT=str(port), SPARKINFER_HOST="127.0.0.1", SPARKINFER_SCHEDULER_ADDR=scheduler_addr,
                      SPARKINFER_DRAIN_GRACE_S="1")
    from gateway.app import main

    if not prof_path:
        main([])
        return
    profile = cProfile.Profile()
    profile.enable()
    try:
        main([])
    finally:
        profile.disable()
        profile.dump_stats(prof_path)


if __name__ == "__main__":
    if sys.argv[1] == "scheduler":
        asyncio.run(serve_scheduler(int(sys.argv[2])))
    else:
        serve_gateway(int(sys.argv[2]), sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "")
