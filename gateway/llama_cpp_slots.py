"""Gateway process: llama-server's GET /slots body: one entry a seat, a busy seat with the counts of the task it runs,
an idle one with those of a task that ended (its `task ? task : task_prev`), as tools/server/server-context.cpp
server_slot::to_json writes them (the prompt and generated text only with its LLAMA_SERVER_SLOTS_DEBUG, never here)."""
from __future__ import annotations

import itertools

from gateway.gen_request import ChoiceProgress
from gateway.llama_cpp_shape import params_json


def task_fields(choice: ChoiceProgress) -> dict:
    """A slot's task fields: its id, its prompt's counts (processed: the tokens read past the prefix-cache hits,
    none until the prompt is read), its sampling params and next_token ([{has_next_token (false once it ended),
    has_new_line, n_remain, n_decoded}], an array of one object as llama.cpp writes it)."""
    req = choice.req
    params = params_json(req.sampling, choice.limit, req.stop, req.ignore_eos, False)
    del params["stream"]   # the request's framing is its route's, not the generation's
    params["n_probs"] = req.num_logprobs or 0
    cached = choice.cached_tokens if choice.prefilled else 0
    return {"id_task": choice.task_id, "n_prompt_tokens": choice.prompt_tokens,
            "n_prompt_tokens_processed": choice.prompt_tokens - cached if choice.prefilled else 0,
            "n_prompt_tokens_cache": cached, "params": params,
            "next_token": [{"has_next_token": not choice.done, "has_new_line": choice.new_line,
                            "n_remain": max(choice.limit - choice.decoded, 0), "n_decoded": choice.decoded}]}


def slot_entries(num_slots: int, num_running: int, n_ctx: int, engine) -> list:
    """GET /slots: `num_slots` seats (SPARKINFER_MAX_NUM_SEQS), the first ones busy: as many as the scheduler runs
    (num_running) or the engine's running choices (ChoiceProgress, oldest first) fill, whichever is more; each of
    those choices gives its seat's task fields. Seats here are not tied to one request, so a choice's seat is its place
    among those running; a seat the scheduler counts busy with no choice of this gateway's has no task fields. The idle
    seats after them hold the tasks that ended last (engine.finished_tasks, task_fields of each, newest first), as
    llama.cpp's idle slots keep theirs; a seat past those has none."""
    choices, finished = engine.running_choices(), list(itertools.islice(engine.finished_tasks, num_slots))
    busy = min(max(num_running, len(choices)), num_slots)
    slots = []
    for i in range(num_slots):
        slot = {"id": i, "id_task": -1, "n_ctx": n_ctx, "speculative": False, "is_processing": i < busy}
        if i < busy and i < len(choices):
            slot.update(task_fields(choices[i]))
        elif i >= busy and i - busy < len(finished):
            slot.update(finished[i - busy])
        slots.append(slot)
    return slots
