"""The gateway's scheduler channel does not inherit another channel's failed connection to the same address."""
from gateway.client import SchedulerClient
from gateway.fake_scheduler import FakeServing, build_tokenizer, start_fake_server


async def test_a_new_client_reaches_a_scheduler_listening_where_a_dead_one_was():
    # a client sees its scheduler go away (its channel fails to reconnect), a new scheduler starts on the same port,
    # and a NEW client to that address must get through at once: with gRPC's process-wide subchannel pool it got
    # UNAVAILABLE "failed to connect to all addresses ... Connection refused" (the old channel's backoff state), the
    # cause of the fake-scheduler test flakes (test_gateway_checks, test_gateway_http_compat, test_gateway_body)
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    first, addr = await start_fake_server(fake)
    old = SchedulerClient(addr)
    assert (await old.info()).max_context_len == 2048
    await first.stop(None)
    try:
        await old.info(timeout=1.0)
    except Exception:  # noqa: BLE001 - the scheduler is gone: any error, what matters is the state it leaves
        pass
    second = await _serve_on(fake, int(addr.rsplit(":", 1)[1]))
    new = SchedulerClient(addr)
    try:
        info = await new.info(timeout=2.0)
        assert info.max_context_len == 2048
    finally:
        await new.close()
        await old.close()
        await second.stop(None)


async def _serve_on(fake, port: int):
    import grpc

    from gateway.fake_scheduler import NO_REUSEPORT
    from proto import pb_grpc

    server = grpc.aio.server(options=NO_REUSEPORT)
    pb_grpc.add_ServingServicer_to_server(fake, server)
    assert server.add_insecure_port(f"127.0.0.1:{port}") == port
    await server.start()
    return server
