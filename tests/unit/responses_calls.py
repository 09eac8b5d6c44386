"""Helpers of the /v1/responses and /v1/conversations tests on the fake scheduler: one request's status and JSON
body, and the prompt the fake scheduler received last."""
import orjson

from gateway.fake_scheduler import build_tokenizer

TOKENIZER = build_tokenizer()
NO_THINK = {"reasoning": {"effort": "none"}}


async def call(client, method: str, path: str, body=None) -> tuple[int, dict]:
    """`method` `path` with `body` sent as JSON (None: no body) -> (status, the JSON answer)."""
    response = await client.request(method, path, data=None if body is None else orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def call_model(client, method: str, path: str, body=None) -> tuple[int, dict]:
    """As call, with the fake model and NO_THINK added to a body (a create's)."""
    return await call(client, method, path, None if body is None else {"model": "fake-model", **NO_THINK, **body})


def prompt_of(fake) -> str:
    """The prompt of the last request the fake scheduler received, special tokens kept."""
    return TOKENIZER.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
