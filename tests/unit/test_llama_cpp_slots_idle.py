"""An idle seat of GET /slots keeps the task it ran last, as llama-server's does: server_slot::to_json writes the task
fields of `task ? task : task_prev` (ggml-org/llama.cpp tools/server/server-context.cpp), so after a request ends its
slot still states id_task, the prompt counts, params and next_token (has_next_token false, its n_decoded); only a slot
that never ran one has none. Monitors read the context a finished chat holds from there (thomas9120/LLama-GUI's
"Context - busiest slot", n_prompt_tokens / n_ctx of every slot, idle or not). Every idle seat here was bare."""
import asyncio

REPLY = "one two three four five six seven eight nine ten"
PROMPT = [10, 11, 12, 13, 14, 15]


async def _slots(client) -> list:
    return await (await client.get("/slots")).json()


async def test_an_idle_seat_keeps_its_last_tasks_fields(stack):
    client, fake = stack
    fake.script.cached_tokens = 4
    response = await client.post("/completion", json={"prompt": PROMPT, "n_predict": 5, "temperature": 0.3})
    assert response.status == 200
    slots = await _slots(client)
    assert not any(slot["is_processing"] for slot in slots)
    last = slots[0]
    assert isinstance(last["id_task"], int) and last["id_task"] >= 0
    assert (last["n_prompt_tokens"], last["n_prompt_tokens_cache"], last["n_prompt_tokens_processed"]) == (6, 4, 2)
    assert (last["params"]["n_predict"], last["params"]["temperature"]) == (5, 0.3)
    [progress] = last["next_token"]
    assert (progress["has_next_token"], progress["n_decoded"], progress["n_remain"]) == (False, 5, 0)
    # A seat that never ran a task has no task fields.
    assert all("next_token" not in slot and "params" not in slot for slot in slots[1:])


async def test_idle_seats_hold_the_latest_tasks_newest_first(stack):
    client, fake = stack
    ids = []
    for n_predict in (2, 3):
        response = await client.post("/completion", json={"prompt": PROMPT, "n_predict": n_predict})
        assert response.status == 200
        ids.append((await _slots(client))[0]["id_task"])
    slots = await _slots(client)
    assert [slot["id_task"] for slot in slots[:2]] == [ids[1], ids[0]]
    assert [slot["next_token"][0]["n_decoded"] for slot in slots[:2]] == [3, 2]


async def test_a_running_seat_comes_first_and_idle_ones_keep_the_finished(stack):
    client, fake = stack
    response = await client.post("/completion", json={"prompt": PROMPT, "n_predict": 2})
    assert response.status == 200
    done = (await _slots(client))[0]["id_task"]
    assert done >= 0
    fake.script.delay_s = 0.05
    request = asyncio.create_task(client.post("/completion", json={"prompt": PROMPT, "n_predict": 6}))
    try:
        for _ in range(200):
            slots = await _slots(client)
            if slots[0]["is_processing"] and "next_token" in slots[0]:
                break
            await asyncio.sleep(0.02)
        assert slots[0]["is_processing"] and slots[0]["id_task"] != done
        assert (slots[1]["is_processing"], slots[1]["id_task"]) == (False, done)
    finally:
        assert (await request).status == 200
