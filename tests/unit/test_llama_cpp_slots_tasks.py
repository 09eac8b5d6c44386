"""GET /slots states a busy seat's task as llama-server does (tools/server/server-context.cpp server_slot::to_json):
id_task, n_prompt_tokens, n_prompt_tokens_processed, n_prompt_tokens_cache, params and next_token
[{has_next_token, has_new_line, n_remain, n_decoded}]. Monitors, watchdogs and balancers poll these while a request runs
(llama.cpp PR #23454 added the prompt counts for them; DingoOz/llm-visuals#12 reads next_token's n_decoded for the
decode rate; a watchdog that restarts a stuck server compares id_task and n_decoded between polls). A busy seat here
was {id, id_task: -1, n_ctx, speculative, is_processing: true} alone, so such a client read no progress (or failed on
slot["next_token"][0])."""
import asyncio

REPLY = "one two three four five six seven eight nine ten"
PROMPT = [10, 11, 12, 13, 14, 15]


async def _busy(client, count: int) -> list:
    """The busy seats once `count` of them carry a task with a token generated (polled; the reply is slowed)."""
    for _ in range(200):
        slots = await (await client.get("/slots")).json()
        busy = [slot for slot in slots if slot["is_processing"] and "next_token" in slot]
        if len(busy) >= count and all(slot["next_token"][0]["n_decoded"] >= 1 for slot in busy):
            return busy
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {count} busy seats with a task: {slots[:count + 1]}")


async def test_a_busy_seat_states_its_tasks_counts_params_and_progress(stack):
    client, fake = stack
    fake.script.delay_s, fake.script.cached_tokens = 0.05, 4
    request = asyncio.create_task(client.post("/completion", json={
        "prompt": PROMPT, "n_predict": 9, "temperature": 0.3, "top_k": 7, "stop": ["zzz"], "n_probs": 2}))
    try:
        [slot] = await _busy(client, 1)
        assert (slot["id"], slot["n_ctx"], slot["is_processing"]) == (0, 2048, True)
        assert isinstance(slot["id_task"], int) and slot["id_task"] >= 0
        assert (slot["n_prompt_tokens"], slot["n_prompt_tokens_cache"], slot["n_prompt_tokens_processed"]) == (6, 4, 2)
        params = slot["params"]
        assert (params["n_predict"], params["temperature"], params["top_k"]) == (9, 0.3, 7)
        assert (params["stop"], params["n_probs"]) == (["zzz"], 2)
        [progress] = slot["next_token"]
        assert progress["has_next_token"] is True and progress["has_new_line"] is False
        assert 1 <= progress["n_decoded"] <= 9 and progress["n_remain"] == 9 - progress["n_decoded"]
    finally:
        response = await request
    assert response.status == 200 and (await response.json())["tokens_predicted"] == 9
    slots = await (await client.get("/slots")).json()
    # Idle again, the seat keeps the task it ran (test_llama_cpp_slots_idle.py), ended: has_next_token false.
    assert not any(slot["is_processing"] for slot in slots) and slots[0]["next_token"][0]["has_next_token"] is False


async def test_each_running_choice_has_a_seat_and_a_task_of_its_own(stack):
    client, fake = stack
    fake.script.delay_s = 0.05
    request = asyncio.create_task(client.post("/completion", json={"prompt": PROMPT, "n_predict": 8, "n_cmpl": 2}))
    try:
        busy = await _busy(client, 2)
        assert [slot["id"] for slot in busy] == [0, 1]
        assert len({slot["id_task"] for slot in busy}) == 2
        assert all(slot["params"]["n_predict"] == 8 for slot in busy)
        first = busy[0]["next_token"][0]["n_decoded"]
        later = await _busy(client, 2)
        assert later[0]["id_task"] == busy[0]["id_task"] and later[0]["next_token"][0]["n_decoded"] >= first
    finally:
        response = await request
    assert response.status == 200
