"""Scheduler process: per-request timing (responses, latency metrics) and per-step overhead accounting."""
import time
from dataclasses import dataclass

from proto import pb


class RequestTimer:
    """Builds each pb.GenerateResponse and feeds the latency histograms and token counters."""

    def __init__(self, metrics):
        self.metrics = metrics
        self.last_token_ns = {}
        # This step's responses, counted once by flush(): per token they were a third of the metrics' time per step.
        self._gaps_s, self._num_responses = [], 0

    def response(self, req, out):
        """The GenerateResponse for one RequestOutput of `req` (first-message fields on its first token)."""
        # Only the fields a response carries: a keyword per empty field (top_logprobs=[], finish_reason="") cost
        # 1.3 us of the 2 us this constructor took, per token (bench/scheduler_host.py).
        resp = pb.GenerateResponse(token_ids=out.token_ids, logprobs=out.logprobs,
                                   num_generated_tokens=len(req.output_token_ids))
        if out.top_logprobs:
            resp.top_logprobs.extend(out.top_logprobs)
        if out.finish_reason:
            resp.finish_reason = out.finish_reason
            resp.stop_token_id = out.stop_token_id
        if out.stop_token_id >= 0:
            resp.stop_token_logprob = out.stop_token_logprob
            if out.stop_top_logprobs is not None:
                resp.stop_token_top_logprobs.CopyFrom(out.stop_top_logprobs)
        if out.prompt_logprobs is not None:
            resp.prompt_logprobs.CopyFrom(out.prompt_logprobs)
        now = req.last_token_ns
        previous = self.last_token_ns.get(req.req_id)
        if previous is None:
            resp.num_prompt_tokens = req.num_prompt_tokens
            resp.num_cached_tokens = req.num_cached_tokens
            resp.first_token_time_ns = req.first_token_ns
            resp.queue_time_ns = req.first_scheduled_ns - req.arrival_ns
            self.metrics.time_to_first_token.observe((req.first_token_ns - req.arrival_ns) / 1e9)
            self.metrics.request_queue_time.observe(resp.queue_time_ns / 1e9)
            self._count_prompt(req)
        else:
            self._gaps_s.append((now - previous) / 1e9)
        self.last_token_ns[req.req_id] = now
        self._num_responses += 1
        return resp

    def flush(self) -> None:
        """Counts the responses built since the last flush: generation_tokens and the inter-token latencies (the
        engine calls it once a step, after publishing the step's responses)."""
        if self._num_responses:
            self.metrics.generation_tokens.inc(self._num_responses)
        self.metrics.inter_token_latency.observe_all(self._gaps_s)
        self._gaps_s, self._num_responses = [], 0

    def _count_prompt(self, req) -> None:
        """A prompt at its first token (as vLLM counts it): in prompt_tokens, and split by source."""
        num_computed = _num_computed(req)
        self.metrics.prompt_tokens.inc(req.num_prompt_tokens)
        self.metrics.prompt_tokens_by_source.labels(source="local_compute").inc(num_computed)
        self.metrics.prompt_tokens_by_source.labels(source="local_cache_hit").inc(req.num_prompt_tokens - num_computed)
        self.metrics.prompt_tokens_cached.inc(req.num_prompt_tokens - num_computed)

    def finished(self, req) -> None:
        """Every request that leaves, aborted ones too (client gone, worker lost): counted under its finish reason and
        observed in the e2e and queue-time histograms, so each histogram's count is the request_success total."""
        now = time.monotonic_ns()
        if self.last_token_ns.pop(req.req_id, None) is None:
            # It left before its first message observed its queue time: waiting still (its wait so far), or seated
            # but without a token yet (as vLLM's ScheduledTiming: arrival to first scheduled).
            self.metrics.request_queue_time.observe(((req.first_scheduled_ns or now) - req.arrival_ns) / 1e9)
        self.metrics.e2e_request_latency.observe((now - req.arrival_ns) / 1e9)
        self.metrics.request_success.labels(finished_reason=req.finish_reason or "abort").inc()
        self._observe_lengths_and_phases(req)

    def _observe_lengths_and_phases(self, req) -> None:
        """vLLM's per-request histograms: every leaving request's lengths, and the times of the phases it reached."""
        self.metrics.request_prompt_tokens.observe(req.num_prompt_tokens)
        self.metrics.request_prefill_kv_computed_tokens.observe(_num_computed(req))
        self.metrics.request_generation_tokens.observe(len(req.output_token_ids))
        if req.max_tokens > 0:
            self.metrics.request_params_max_tokens.observe(req.max_tokens)
        if req.first_token_ns and req.first_scheduled_ns:
            self.metrics.request_prefill_time.observe((req.first_token_ns - req.first_scheduled_ns) / 1e9)
            self.metrics.request_decode_time.observe((req.last_token_ns - req.first_token_ns) / 1e9)
            self.metrics.request_inference_time.observe((req.last_token_ns - req.first_scheduled_ns) / 1e9)
            num_after_first = len(req.output_token_ids) - 1
            decode_s = (req.last_token_ns - req.first_token_ns) / 1e9
            self.metrics.request_time_per_output_token.observe(decode_s / num_after_first if num_after_first > 0 else 0)


@dataclass
class EngineStats:
    """Sums over steps: where a step's wall time goes (the bench reads these)."""

    num_steps: int = 0
    num_rows: int = 0
    num_tokens: int = 0
    num_sampled: int = 0
    schedule_ns: int = 0       # Scheduler.schedule + building the PackedStep
    round_trip_ns: int = 0     # send -> StepResult back (worker forward + sampling + wire)
    forward_ns: int = 0        # worker-reported forward + sampling time
    update_ns: int = 0         # applying the result and publishing responses

    def record(self, step, result, schedule_ns: int, round_trip_ns: int, update_ns: int) -> None:
        """Adds one step: its rows, tokens run, rows sampled, and its planning, round-trip, worker forward and update
        times (ns)."""
        self.num_steps += 1
        self.num_rows += len(step.rows)
        self.num_tokens += len(step.token_ids)
        self.num_sampled += len(result.req_ids)
        self.schedule_ns += schedule_ns
        self.round_trip_ns += round_trip_ns
        self.forward_ns += result.forward_ns
        self.update_ns += update_ns

    def overhead_us_per_step(self) -> float:
        """Time per step outside the worker's forward: planning, wire both ways, applying results."""
        if not self.num_steps:
            return 0.0
        outside = self.schedule_ns + self.round_trip_ns - self.forward_ns + self.update_ns
        return outside / self.num_steps / 1e3


def _num_computed(req) -> int:
    """The prompt tokens a request prefilled: its prompt less the prefix-cache hit (never more than the prompt)."""
    return req.num_prompt_tokens - min(req.num_cached_tokens, req.num_prompt_tokens)
