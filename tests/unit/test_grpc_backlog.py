"""Many calls at once on the gateway -> scheduler connection (fake scheduler, real gRPC server): gRPC C-core cancelled
new calls past 1000 that its Python loop had not taken yet (proto/backlog.py), so three /v1/completions requests of 512
choices at once (4 prompts x n = 128), or as many clients arriving together, came back 500 "scheduler error
(CANCELLED)"."""
import asyncio

import orjson

from proto.backlog import backlog_options


async def _completions(client, tag: str) -> tuple:
    prompts = [f"{tag} {i}" for i in range(4)]
    response = await client.post("/v1/completions", data=orjson.dumps({"prompt": prompts, "n": 128, "max_tokens": 2}))
    return response.status, orjson.loads(await response.read())


async def test_three_requests_of_512_choices_at_once_are_served(stack):
    client, fake = stack
    answers = await asyncio.gather(*[_completions(client, f"b{j}") for j in range(3)])
    for status, body in answers:
        assert status == 200, body
        assert [choice["index"] for choice in body["choices"]] == list(range(512))
        assert all(choice["text"] == "Hello world" and choice["finish_reason"] == "length"
                   for choice in body["choices"])
        assert body["usage"]["completion_tokens"] == 2 * 512
    assert len(fake.script.requests) == 3 * 512


def test_the_scheduler_server_holds_the_backlog():
    from scheduler.server import GRPC_OPTIONS

    assert set(backlog_options()) <= set(GRPC_OPTIONS)
    assert dict(backlog_options())["grpc.server.max_pending_requests"] >= 1 << 20
