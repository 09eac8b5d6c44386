"""KoboldAI API's /api/extra/abort and /api/extra/generate/check by genkey (gateway/kobold_jobs.py), as KoboldAI Lite
uses them (its Abort button posts the genkey of its generate; its polled streaming reads the text so far) and as
KoboldCpp (koboldcpp.py) and TabbyAPI (endpoints/Kobold/utils/generation.py, many users at once) answer them. The
abort answered "false" and ended nothing, so the generation ran on to its max_length; the check was always empty."""
import asyncio

import grpc
import orjson
import pytest

from gateway.app import ENGINE_KEY
from gateway.errors import Unavailable

REPLY = " ".join(f"w{i}" for i in range(300))
SLOW_S = 0.02


async def _text_so_far(client, genkey: str) -> str:
    """Polls the check until the generation sent with `genkey` has some text (up to 5 s on a loaded box)."""
    for _ in range(500):
        response = await client.post("/api/extra/generate/check", json={"genkey": genkey})
        text = (await response.json())["results"][0]["text"]
        if text:
            return text
        await asyncio.sleep(0.01)
    raise AssertionError(f"no text for {genkey}")


async def test_abort_by_genkey_ends_that_generation_with_its_text(stack):
    client, fake = stack
    fake.script.delay_s = SLOW_S
    body = {"prompt": "hi", "max_length": 300, "temperature": 0}
    mine = asyncio.create_task(client.post("/api/v1/generate", json={**body, "genkey": "KCPP1111"}))
    other = asyncio.create_task(client.post("/api/v1/generate", json={**body, "genkey": "KCPP2222", "max_length": 40}))
    so_far = await _text_so_far(client, "KCPP1111")
    assert REPLY.startswith(so_far)
    answer = await client.post("/api/extra/abort", json={"genkey": "KCPP1111"})
    assert (answer.status, await answer.json()) == (200, {"success": "true", "done": "true"})
    response = await mine
    result = (await response.json())["results"][0]
    assert response.status == 200 and result["finish_reason"] == "length"
    assert REPLY.startswith(result["text"]) and len(so_far) <= len(result["text"]) < len(REPLY)
    # The other user's generation, another genkey, runs to its own end.
    result = (await (await other).json())["results"][0]
    assert result["completion_tokens"] == 40 and REPLY.startswith(result["text"])
    # Nothing runs under the genkey any more: KoboldCpp's answer for a key it does not run, an empty check.
    answer = await client.post("/api/extra/abort", json={"genkey": "KCPP1111"})
    assert await answer.json() == {"success": "false", "done": "false"}
    check = await client.post("/api/extra/generate/check", json={"genkey": "KCPP1111"})
    assert await check.json() == {"results": [{"text": ""}]}


async def test_a_stream_aborted_by_genkey_ends_with_its_finish_event(stack):
    client, fake = stack
    fake.script.delay_s = SLOW_S
    response = await client.post("/api/extra/generate/stream",
                                 json={"prompt": "hi", "max_length": 300, "genkey": "KCPP3333"})
    await response.content.readline()
    so_far = await _text_so_far(client, "KCPP3333")
    answer = await client.post("/api/extra/abort", json={"genkey": "KCPP3333"})
    assert await answer.json() == {"success": "true", "done": "true"}
    raw = (await response.read()).decode()
    data = [orjson.loads(line[6:]) for line in raw.split("\n") if line.startswith("data: ")]
    assert data[-1] == {"token": "", "finish_reason": "length"}
    assert len(so_far) < len(REPLY) and len(fake.script.requests) == 1


async def test_a_bare_abort_ends_the_one_generation_in_flight(stack):
    """KoboldCpp's single user sends no genkey; its bare abort (SillyTavern posts one with no body whenever its user
    stops) ends the generation in flight, as KoboldCpp ends its current one."""
    client, fake = stack
    fake.script.delay_s = SLOW_S
    bare = asyncio.create_task(client.post("/api/v1/generate", json={"prompt": "hi", "max_length": 60}))
    await _text_so_far(client, "")
    answer = await client.post("/api/extra/abort", data=b"")
    assert await answer.json() == {"success": "true", "done": "true"}
    assert (await (await bare).json())["results"][0]["completion_tokens"] < 60


async def _running(fake, num: int) -> None:
    for _ in range(500):
        if fake.num_running == num:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{fake.num_running} running, not {num}")


@pytest.mark.parametrize("genkeys", [("", ""), ("", "KCPP4444")], ids=["two-bare", "bare-and-keyed"])
async def test_a_bare_abort_ends_nothing_while_several_generations_run(stack, genkeys):
    """Two users (two SillyTavern instances send no genkey): one's Stop posts a bare abort, which must not end the
    other's generation. KoboldCpp acts on a bare abort or check only while no other request waits (koboldcpp.py:
    `multiuserkey=="" and requestsinqueue==0`). Before: the bare abort ended every generation sent without a genkey,
    the other user's too (its answer cut short)."""
    client, fake = stack
    fake.script.delay_s = SLOW_S
    tasks = [asyncio.create_task(client.post("/api/v1/generate", json={
        "prompt": "hi", "max_length": 60, **({"genkey": genkey} if genkey else {})})) for genkey in genkeys]
    await _running(fake, 2)
    answer = await client.post("/api/extra/abort", data=b"")
    assert await answer.json() == {"success": "false", "done": "false"}
    check = await client.post("/api/extra/generate/check", json={})
    assert await check.json() == {"results": [{"text": ""}]}
    for task in tasks:
        result = (await (await task).json())["results"][0]
        assert result["completion_tokens"] == 60 and REPLY.startswith(result["text"])


@pytest.mark.parametrize("path", ["/api/v1/generate", "/api/extra/generate/stream"])
async def test_a_full_queue_is_koboldcpps_503_busy(stack, path):
    """KoboldCpp's answer when it cannot take a generate (koboldcpp.py: modelbusy not acquired, its multiuser queue
    full), which KoboldAI clients read as "busy, retry" (the AI Horde worker's TextBackendBusy on a 503 and its
    detail.msg). It was a 429 in LM Studio's error shape on /api/v1/generate and Ollama's 503 words on the stream."""
    client, fake = stack
    fake.script.error = grpc.StatusCode.RESOURCE_EXHAUSTED
    fake.script.error_details = "queue full: 4 requests waiting"
    response = await client.post(path, json={"prompt": "hi", "max_length": 8, "genkey": "KCPP5555"})
    assert response.status == 503 and response.headers["Retry-After"] == "1"
    assert await response.json() == {"detail": {"msg": "Server is busy; please try again later.",
                                                "type": "service_unavailable"}}


async def test_a_stream_ended_by_an_error_sends_no_done(stack):
    """A Kobold stream cut by the server (the drain grace over, a dead worker) ends with its error object as a JSON
    data event and no `data: [DONE]`, which KoboldCpp never sends there and SillyTavern's KoboldAI source
    JSON.parses (its generation failed on it)."""
    client, fake = stack
    fake.script.delay_s = SLOW_S
    response = await client.post("/api/extra/generate/stream", json={"prompt": "hi", "max_length": 300})
    await response.content.readline()
    client.server.app[ENGINE_KEY].abort_all(Unavailable("the server is shutting down"))
    raw = (await response.read()).decode()
    data = [orjson.loads(line[6:]) for line in raw.split("\n") if line.startswith("data: ")]
    assert data[-1]["error"]["message"] == "the server is shutting down"
    assert all("token" in d for d in data[:-1])
