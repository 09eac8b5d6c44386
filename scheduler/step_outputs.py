"""Scheduler process: a StepResult applied to the Scheduler's requests: sampled tokens appended, stops, lengths and
failures finished, each as the RequestOutput its stream gets. Pure Python, no sockets, no torch."""
from scheduler.prompt_logprobs import merge_prompt_logprobs, take_prompt_logprobs
from scheduler.repetition import ends_in_repetition
from scheduler.request import RUNNING, Request, RequestOutput


class StepOutputs:
    """The Scheduler's result side (planning is scheduler.py's), a part it holds (Scheduler.outputs), not a base: it
    reads the scheduler's requests, running list, prefix cache, clock, max_context_len and _finish through
    self.sched at each call, as reset_pools replaces the pools."""

    def __init__(self, sched):
        self.sched = sched

    def update(self, result) -> list:
        """Applies a pb.StepResult: appends sampled tokens, finishes requests; returns RequestOutputs."""
        if result.error:
            return self.fail_running(result.error)
        self.sched.prefix_cache.commit()
        outputs = self._fail_requests(result.failed_requests)
        tops = result.top_logprobs if len(result.top_logprobs) else ()
        for entry in result.prompt_logprobs:
            merge_prompt_logprobs(self.sched.requests.get(entry.req_id), entry)
        requests, token_ids, logprobs = self.sched.requests, result.token_ids, result.logprobs
        for i, req_id in enumerate(result.req_ids):
            req = requests.get(req_id)
            # Aborted while the step ran: its token is dropped.
            if req is None or req.status != RUNNING:
                continue
            outputs.append(self._append_token(req, token_ids[i], logprobs[i], tops[i] if i < len(tops) else None))
        return outputs

    def _append_token(self, req: Request, token_id: int, logprob: float, top) -> RequestOutput:
        """Runs once per sampled token: kept lean (bench/scheduler_host.py times it at 256 rows a step)."""
        now = self.sched._clock()
        req.first_token_ns = req.first_token_ns or now
        req.last_token_ns = now
        output_ids, sampling = req.output_token_ids, req.sampling
        # Below min_tokens a stop / eos token is an ordinary token (the worker masks them; belt and braces).
        may_stop = len(output_ids) >= sampling.min_tokens
        output_ids.append(token_id)
        prompt_logprobs = take_prompt_logprobs(req) if sampling.prompt_logprobs else None
        if not sampling.num_logprobs:
            top = None
        if may_stop and (token_id in req.stop_token_ids or token_id in req.eos_token_ids):
            self.sched.running.remove(req)
            self.sched._finish(req, "stop", token_id)
            return RequestOutput(req.req_id, prompt_logprobs=prompt_logprobs).stop_on(token_id, logprob, top)
        out = RequestOutput(req.req_id, [token_id], [logprob], [] if top is None else [top],
                            prompt_logprobs=prompt_logprobs)
        if (req.max_tokens and len(output_ids) >= req.max_tokens) or req.num_tokens >= self.sched.max_context_len:
            self.sched.running.remove(req)
            self.sched._finish(req, "length")
            out.finish_reason = "length"
        elif req.repetition_stop is not None and len(output_ids) >= sampling.min_tokens \
                and ends_in_repetition(output_ids, req.repetition_stop):
            # vLLM checks it last, from the min_tokens-th token on (vllm/v1/core/sched/utils.py check_stop).
            self.sched.running.remove(req)
            self.sched._finish(req, "repetition")
            out.finish_reason = "repetition"
        return out

    def _fail_requests(self, failures) -> list:
        """Ends the requests the worker failed alone (their own fault, e.g. a bad grammar)."""
        outputs = []
        for failure in failures:
            req = self.sched.requests.get(failure.req_id)
            if req is None or req.status != RUNNING:
                continue
            self.sched.running.remove(req)
            self.sched._finish(req, "error")
            outputs.append(RequestOutput(req.req_id, finish_reason="error", error=failure.error, invalid=True))
        return outputs

    def fail_running(self, error: str) -> list:
        """A failed step aborts every running request (their GDN state is no longer trustworthy)."""
        self.sched.prefix_cache.drop_pending()
        outputs = []
        for req in list(self.sched.running):
            self.sched.running.remove(req)
            self.sched._finish(req, "error")
            outputs.append(RequestOutput(req.req_id, finish_reason="error", error=error))
        return outputs
