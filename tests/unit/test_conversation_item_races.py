"""Conversations API (fake scheduler): a request that changes a conversation (items.create, update) while its body
is still arriving does not undo what another request added meanwhile. Before, the conversation was read before the
body and written back after it, so items another request (or a response in the conversation) added in between were
lost."""
import asyncio

import orjson
import pytest


def _slow(first: bytes, rest: bytes, release: asyncio.Event):
    async def body():
        yield first
        await release.wait()
        yield rest
    return body()


@pytest.mark.parametrize("route, first, rest", [
    ("/items", b'{"items": [{"role": "user", ', b'"content": "slow"}]}'),
    ("", b'{"metadata": ', b'{"k": "v"}}'),
], ids=["items.create", "update"])
async def test_items_added_while_a_body_arrives_are_kept(stack, route, first, rest):
    client, _ = stack
    created = await (await client.post("/v1/conversations", json={})).json()
    path = f"/v1/conversations/{created['id']}"
    release = asyncio.Event()
    slow = asyncio.create_task(client.post(path + route, data=_slow(first, rest, release),
                                           headers={"Content-Type": "application/json"}))
    await asyncio.sleep(0.2)
    fast = await client.post(f"{path}/items", json={"items": [{"role": "user", "content": "fast"}]})
    assert fast.status == 200
    release.set()
    assert (await slow).status == 200
    listed = orjson.loads(await (await client.get(f"{path}/items?order=asc")).read())
    texts = [item["content"][0]["text"] for item in listed["data"]]
    assert "fast" in texts and texts == (["fast", "slow"] if route else ["fast"])
