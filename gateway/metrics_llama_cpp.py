"""Gateway process: llama-server's own /metrics series (llamacpp:*), read at each scrape from what the gateway and
the scheduler count, so that a monitor of llama-server finds them beside the sparkinfer_ ones."""
from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from gateway.metrics import GENERATION_TOKENS, PROMPT_TOKENS, REGISTRY, SCHEDULER_LOAD

# llama-server's names and help texts (tools/server/server-context.cpp, its /metrics handler; README "metrics"):
# its eleven series, each as one unlabelled sample (`llamacpp:prompt_tokens_total 74`), as llama-server writes them.
_PROMPT = ("llamacpp:prompt_tokens", "Number of prompt tokens processed.")
_PROMPT_S = ("llamacpp:prompt_seconds", "Prompt process time")
_PREDICTED = ("llamacpp:tokens_predicted", "Number of generation tokens processed.")
_PREDICTED_S = ("llamacpp:tokens_predicted_seconds", "Predict process time")
_DECODES = ("llamacpp:n_decode", "Total number of llama_decode() calls")
# llama-server types these two counter without a _total suffix; a counter's sample here always ends in _total, so
# they are gauges under llama-server's exact names (the name is what its readers match).
_TOKENS_MAX = ("llamacpp:n_tokens_max", "Largest observed n_tokens.")
_BUSY = ("llamacpp:n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call")
_PROMPT_RATE = ("llamacpp:prompt_tokens_seconds", "Average prompt throughput in tokens/s.")
_PREDICTED_RATE = ("llamacpp:predicted_tokens_seconds", "Average generation throughput in tokens/s.")
# (name, help, the scheduler's Load field it reads): llama-server's slots processing a request and its tasks
# deferred for want of a free slot are the scheduler's running and waiting requests.
GAUGES = (
    ("llamacpp:requests_processing", "Number of requests processing.", "num_running"),
    ("llamacpp:requests_deferred", "Number of requests deferred.", "num_waiting"),
)


def counter_value(counter) -> float:
    """The value of an unlabelled prometheus_client Counter, from its own collect()."""
    return next(s.value for s in next(iter(counter.collect())).samples if s.name.endswith("_total"))


class LlamaCppSeries:
    """llama-server's series. prompt_tokens_total and tokens_predicted_total are sparkinfer_gateway_prompt_tokens_total
    and _generation_tokens_total under its names (one count, shown twice); the seconds are each choice's prompt time
    (from its seat to its first token, as `timings.prompt_ms`) and generation time (its first token to its last) summed;
    n_tokens_max the most tokens a choice held (its prompt and output but the last token, as tokens_cached); the two
    throughput gauges the tokens over the seconds since the last scrape, 0 with none, as llama-server resets its buckets
    at each /metrics; n_decode_total, n_busy_slots_per_decode, requests_processing and requests_deferred the scheduler's
    steps, sequences a step and requests of the same scrape, left out while it does not answer, as the sparkinfer_ ones
    are. Every call comes from the gateway's event loop (choice_calls' message handler adds, /metrics' handler
    collects on the loop, as prometheus_client's generate_latest runs there), so no call interleaves another and the
    counts take no lock."""

    def __init__(self):
        self.prompt_seconds = self.predicted_seconds = 0.0
        self.tokens_max = 0
        # prompt tokens and seconds, predicted tokens and seconds, at the last scrape
        self._last = (0.0, 0.0, 0.0, 0.0)

    def add_prompt_seconds(self, seconds: float) -> None:
        """A choice's prompt time (seconds), counted at its first token."""
        self.prompt_seconds += seconds

    def add_predicted_seconds(self, seconds: float) -> None:
        """Time (seconds) a choice spent generating, since its previous token."""
        self.predicted_seconds += seconds

    def observe_tokens(self, num_tokens: int) -> None:
        """The tokens a choice holds so far (n_tokens_max keeps the largest)."""
        self.tokens_max = max(self.tokens_max, num_tokens)

    def _rates(self, now: tuple) -> tuple[float, float]:
        """(prompt, predicted) tokens per second since the last scrape; 0 where nothing was processed."""
        last, self._last = self._last, now
        deltas = [current - before for current, before in zip(now, last)]
        return tuple(tokens / seconds if tokens > 0 and seconds > 0 else 0.0
                     for tokens, seconds in (deltas[0:2], deltas[2:4]))

    def collect(self):
        prompt, predicted = counter_value(PROMPT_TOKENS), counter_value(GENERATION_TOKENS)
        for (name, doc), value in ((_PROMPT, prompt), (_PROMPT_S, self.prompt_seconds), (_PREDICTED, predicted),
                                   (_PREDICTED_S, self.predicted_seconds)):
            yield CounterMetricFamily(name, doc, value=value)
        yield GaugeMetricFamily(*_TOKENS_MAX, value=self.tokens_max)
        prompt_rate, predicted_rate = self._rates((prompt, self.prompt_seconds, predicted, self.predicted_seconds))
        yield GaugeMetricFamily(*_PROMPT_RATE, value=prompt_rate)
        yield GaugeMetricFamily(*_PREDICTED_RATE, value=predicted_rate)
        load = SCHEDULER_LOAD.load
        if load is None:
            return
        yield CounterMetricFamily(*_DECODES, value=load.num_steps)
        yield GaugeMetricFamily(*_BUSY, value=load.num_step_rows / max(load.num_steps, 1))
        for name, doc, field in GAUGES:
            yield GaugeMetricFamily(name, doc, value=getattr(load, field))

    def describe(self):
        """The series' names, so that a scrape naming them (name[]) finds this collector."""
        for name, doc in (_PROMPT, _PROMPT_S, _PREDICTED, _PREDICTED_S, _DECODES):
            yield CounterMetricFamily(name, doc)
        for name, doc in (_TOKENS_MAX, _BUSY, _PROMPT_RATE, _PREDICTED_RATE, *(g[:2] for g in GAUGES)):
            yield GaugeMetricFamily(name, doc)


LLAMA_CPP = LlamaCppSeries()
REGISTRY.register(LLAMA_CPP)
