"""Gateway process: llama-server's GET /slots body: one entry a seat, a busy seat with the counts of the task it runs,
as tools/server/server-context.cpp server_slot::to_json writes them (the prompt and generated text only with its
LLAMA_SERVER_SLOTS_DEBUG, never here)."""
from __future__ import annotations

from gateway.gen_request import ChoiceProgress
from gateway.llama_cpp_shape import params_json


def _task(choice: ChoiceProgress) -> dict:
    """A busy slot's task fields: its id, its prompt's counts (processed: the tokens read past the prefix-cache hits,
    none until the prompt is read), its sampling params and next_token ([{has_next_token, has_new_line, n_remain,
    n_decoded}], an array of one object as llama.cpp writes it)."""
    req = choice.req
    params = params_json(req.sampling, choice.limit, req.stop, req.ignore_eos, False)
    del params["stream"]   # the request's framing is its route's, not the generation's
    params["n_probs"] = req.num_logprobs or 0
    cached = choice.cached_tokens if choice.prefilled else 0
    return {"id_task": choice.task_id, "n_prompt_tokens": choice.prompt_tokens,
            "n_prompt_tokens_processed": choice.prompt_tokens - cached if choice.prefilled else 0,
            "n_prompt_tokens_cache": cached, "params": params,
            "next_token": [{"has_next_token": True, "has_new_line": choice.new_line,
                            "n_remain": max(choice.limit - choice.decoded, 0), "n_decoded": choice.decoded}]}


def slot_entries(num_slots: int, num_running: int, n_ctx: int, choices: list) -> list:
    """GET /slots: `num_slots` seats (SPARKINFER_MAX_NUM_SEQS), the first ones busy: as many as the scheduler runs
    (num_running) or this gateway's running choices (ChoiceProgress, oldest first) fill, whichever is more; each of
    those choices gives its seat's task fields. Seats here are not tied to one request, so a choice's seat is its place
    among those running; a seat the scheduler counts busy with no choice of this gateway's has no task fields."""
    busy = min(max(num_running, len(choices)), num_slots)
    slots = []
    for i in range(num_slots):
        slot = {"id": i, "id_task": -1, "n_ctx": n_ctx, "speculative": False, "is_processing": i < busy}
        if i < busy and i < len(choices):
            slot.update(_task(choices[i]))
        slots.append(slot)
    return slots
