"""KoboldCpp's GET /api/extra/perf (koboldcpp.py), which KoboldAI clients poll for the server's state: `idle` 1 and
`queue` 0 before a timed run (benchmark scripts' wait for an idle backend), the busy state in status lines, and the
last generation's figures. It was a 404 (fake scheduler)."""
import orjson

REPLY = "Hello there, traveller"


async def test_perf_reports_the_queue_idle_and_the_last_generation(stack):
    client, fake = stack
    fake.num_running, fake.load_fields = 3, {"num_waiting": 2}
    response = await client.get("/api/extra/perf")
    busy = await response.json()
    assert response.status == 200 and (busy["queue"], busy["idle"], busy["total_gens"]) == (2, 0, 0)
    assert busy["stop_reason"] == -1 and busy["uptime"] >= busy["idletime"] >= 0
    fake.num_running, fake.load_fields = 0, {}
    body = {"prompt": "hi", "max_length": 3, "sampler_seed": 42}
    answer = await (await client.post("/api/v1/generate", data=orjson.dumps(body))).json()
    idle = await (await client.get("/api/extra/perf")).json()
    assert (idle["queue"], idle["idle"], idle["total_gens"]) == (0, 1, 1)
    # The output limit ended it: KoboldCpp's OUT_OF_TOKENS (0), its tokens and seed.
    assert answer["results"][0]["finish_reason"] == "length"
    assert (idle["stop_reason"], idle["last_token_count"], idle["last_seed"]) == (0, 3, 42)
    assert idle["last_process"] >= 0 and idle["last_eval"] >= 0
    await client.post("/api/v1/generate", data=orjson.dumps({"prompt": "hi", "max_length": 50}))
    last = await (await client.get("/api/extra/perf")).json()
    # The reply's end token: EOS_TOKEN (1); no seed sent: -1.
    assert (last["stop_reason"], last["last_seed"], last["total_gens"]) == (1, -1, 2)
