"""Worker process: turns a PackedStep into a ForwardBatch, runs the model, samples, and builds the StepResult."""
import time
import traceback
from dataclasses import dataclass, field

import torch

from proto import pb
from worker.batch import ForwardBatch, to_device
from worker.block_tables import BlockTableError, SlotTables
from worker.cache import ModelCache
from worker.graphs import DecodeGraphs, forward_step
from worker.prefill_graphs import PrefillGraphs
from worker.grammar import start_grammar
from worker.prompt_logprobs import PromptLogprobsError, forward_with_prompt_logprobs, prompt_rows
from worker.sampler import Sampler, SamplingState

MIB = 1024 * 1024


class StepError(Exception):
    """A step the worker cannot run (e.g. a row for a request it holds no sampling state for)."""


def _check_slots(step) -> None:
    """StepError when two rows of `step` hold one GDN state slot, or a snapshot (written after the forward) goes into
    a row's slot: either would run one sequence's recurrent state over another's without a word."""
    slots = [row.state_slot for row in step.rows]
    if len(set(slots)) != len(slots):
        shared = next(slot for slot in slots if slots.count(slot) > 1)
        raise StepError(f"two rows of step {step.step_id} hold state slot {shared}")
    held = set(slots).intersection(copy.dst_slot for copy in step.snapshot_states)
    if held:
        raise StepError(f"step {step.step_id} snapshots into state slot {min(held)}, which one of its rows holds")


@dataclass
class PoolSizes:
    num_blocks: int
    block_size: int
    num_slots: int


def size_pools(config, block_size: int, num_slots: int, num_blocks: int, kv_cache_bytes: int, dtype) -> PoolSizes:
    """Pool sizes from flags; num_blocks 0 = as many as kv_cache_bytes hold, but no more than every slot
    could fill at full context. Raises ValueError for sizes that cannot serve one request."""
    if num_slots <= 0 or block_size <= 0:
        raise ValueError(f"num_state_slots ({num_slots}) and block_size ({block_size}) must be > 0")
    if num_blocks <= 0:
        per_block = ModelCache.bytes_per_block(config, block_size, dtype)
        full = num_slots * -(-config.max_model_len // block_size)
        num_blocks = min(full, max(1, kv_cache_bytes // max(1, per_block)))
    return PoolSizes(num_blocks, block_size, num_slots)


@dataclass
class Launched:
    """A step between ModelRunner.launch and finish: its result so far and what is still on the device."""

    step: object                    # pb.PackedStep
    result: object                  # pb.StepResult being filled (error set once the step failed)
    t0: int                         # perf_counter_ns at launch
    rows: list = field(default_factory=list)    # the rows that sample
    states: list = field(default_factory=list)  # their SamplingStates
    logits: object = None           # [M, V'] float32 until sampled
    sampled: object = None          # sampler.SampleLaunch
    event: object = None            # CUDA event after the sampling (None on CPU: already done)

    def fail(self, exc: Exception) -> None:
        """Turns the step's result into an error (the exception and a short traceback) and drops what was on the
        device."""
        trace = traceback.format_exc(limit=4)
        self.result = pb.StepResult(step_id=self.step.step_id, error=f"{type(exc).__name__}: {exc}\n{trace}")
        self.logits = self.sampled = None

    def record_event(self) -> None:
        """Records a CUDA event after the sampling (finish waits on it); nothing on CPU."""
        if self.sampled.token_ids.is_cuda:
            self.event = torch.cuda.Event()
            self.event.record()

    def done(self) -> bool:
        """Whether the device finished this step's sampling (collect would not wait)."""
        return self.event is None or self.event.query()


class ModelRunner:
    """Holds the model, its cache and every live request's sampling state; execute() runs one step."""

    def __init__(self, model, config, cache: ModelCache, vocab_size: int, sampler_seed: int = 0, grammars=None):
        self.model, self.config, self.cache = model, config, cache
        # CUDA graphs of all-decode steps (worker/graphs.py): SPARKINFER_CUDA_GRAPHS, None on CPU or when off
        self.graphs = DecodeGraphs.create(model, cache, cache.num_slots)
        # piecewise CUDA graphs of prefill / mixed steps (worker/prefill_graphs.py): SPARKINFER_PREFILL_GRAPHS
        self.prefill_graphs = PrefillGraphs.create(model, cache)
        self.grammars = grammars    # worker.grammar.GrammarBook for constrained requests; None = none served
        self.sampler = Sampler(vocab_size, seed=sampler_seed, grammars=grammars)
        self.states = {}
        # each state slot's KV block table, kept between steps; block ids checked against the pool
        self.tables = SlotTables(cache.num_slots, pool_blocks=cache.num_blocks)
        self.session_id = ""
        self.previous = None  # (ids [M] int64 on the device, {req_id: row}) of the step sampled last

    def execute(self, step) -> "pb.StepResult":
        """Runs one pb.PackedStep to its result (launch, sample, finish); never raises: a failure comes back as
        StepResult.error."""
        return self.finish(self.sample(self.launch(step)))

    def launch(self, step) -> "Launched":
        """Queues a step's forward on the device (prefix-cache copies around it) without waiting for it; its
        previous_token rows read the ids sampled in the step sampled last. Never raises (the error is kept)."""
        launched = Launched(step, pb.StepResult(step_id=step.step_id), time.perf_counter_ns())
        try:
            self._launch(launched)
        except Exception as exc:  # the worker must outlive one bad step
            # Its rows' tables may be half applied; the scheduler fails every running request and sends the next
            # row of each slot whole, while a row planned behind this step meets no table (StepError), not a stale one.
            self.tables.clear()
            launched.fail(exc)
        return launched

    def sample(self, launched: "Launched") -> "Launched":
        """Queues the sampling of a launched step. Call it after finish() of the step before (its tokens feed the
        penalties, grammars and seeds); the ids stay on the device for the next step's previous_token rows."""
        self.previous = None
        if launched.logits is None or launched.result.error:
            return launched
        try:
            with torch.inference_mode():
                launched.sampled = self.sampler.launch(launched.logits, launched.states)
                launched.sampled.to_host()
            launched.logits = None
            self.previous = (launched.sampled.token_ids, {row.req_id: i for i, row in enumerate(launched.rows)})
            launched.record_event()
        except Exception as exc:
            launched.fail(exc)
        return launched

    def finish(self, launched: "Launched") -> "pb.StepResult":
        """Waits for a sampled step's tokens and returns its StepResult (session id and forward_ns set)."""
        try:
            if launched.sampled is not None and not launched.result.error:
                if launched.event is not None:
                    launched.event.synchronize()  # this step's copies, not the step queued behind it
                self._collect(launched)
        except Exception as exc:
            launched.fail(exc)
        result = launched.result
        result.session_id = launched.step.session_id
        result.forward_ns = time.perf_counter_ns() - launched.t0
        return result

    def _launch(self, launched: "Launched") -> None:
        step = launched.step
        if step.session_id != self.session_id:
            # A new scheduler session (scheduler restart or worker re-registered): old requests are gone.
            self.states.clear()
            self.tables.clear()
            self.session_id, self.previous = step.session_id, None
        for req_id in step.finished_req_ids:
            self.states.pop(req_id, None)
        for new in step.new_requests:
            self.states[new.req_id] = SamplingState(new.req_id, new.sampling, list(new.prompt_token_ids),
                                                    list(new.output_token_ids), start_grammar(self.grammars, new),
                                                    tuple(new.min_tokens_stop_ids))
        if not step.rows:
            return
        batch = self.build_batch(step)
        launched.rows = [row for row in step.rows if row.sample]
        launched.states = [self._state(row.req_id) for row in launched.rows]
        with torch.inference_mode():
            self._previous_tokens(step, batch)
            self.copy_states(step.restore_states)
            launched.logits = self._forward(step, batch, launched.result)
            self.copy_states(step.snapshot_states)

    def _collect(self, launched: "Launched") -> None:
        sampled, result = self.sampler.collect(launched.sampled), launched.result
        states = launched.states
        for row, st, token_id, logprob, top in zip(launched.rows, states, sampled.token_ids, sampled.logprobs,
                                                   sampled.top_logprobs):
            if st.grammar is not None and st.grammar.error:
                result.failed_requests.add(req_id=row.req_id, error=st.grammar.error)
                continue
            st.output_token_ids.append(token_id)
            result.req_ids.append(row.req_id)
            result.token_ids.append(token_id)
            result.logprobs.append(logprob)
            if top is not None:
                result.top_logprobs.add(token_ids=top[0], logprobs=top[1])
            elif st.params.num_logprobs == 0 and any(s.params.num_logprobs for s in states):
                result.top_logprobs.add()

    def _previous_tokens(self, step, batch) -> None:
        """Writes the ids sampled in the previous step into this step's previous_token rows (on the device, no
        wait). StepError when such a row's request sampled nothing there."""
        positions, sources, offset = [], [], 0
        index_of = self.previous[1] if self.previous is not None else {}
        for row in step.rows:
            if row.previous_token:
                if row.num_tokens != 1 or row.req_id not in index_of:
                    raise StepError(f"row {row.req_id!r} takes the previous step's token, but the worker sampled "
                                    f"none for it there")
                positions.append(offset)
                sources.append(index_of[row.req_id])
            offset += row.num_tokens
        if positions:
            device = batch.input_ids.device
            ids = self.previous[0][to_device(sources, device, torch.int64)]
            batch.input_ids[to_device(positions, device, torch.int64)] = ids.to(batch.input_ids.dtype)

    def _forward(self, step, batch, result) -> torch.Tensor:
        """Logits [M, V'] f32 of the sampled rows; rows asking for prompt logprobs also add theirs to `result`."""
        rows = prompt_rows(step, self.states)
        if not rows:
            return forward_step(self.model, self.cache, batch, self.graphs, [row.num_tokens for row in step.rows],
                                [row.context_len for row in step.rows], self.prefill_graphs)
        try:
            logits, scored = forward_with_prompt_logprobs(self.model, self.cache, batch, rows, self.states,
                                                          self.sampler.vocab_size)
        except PromptLogprobsError as exc:
            raise StepError(str(exc)) from exc
        result.prompt_logprobs.extend(scored)
        return logits

    def copy_states(self, copies) -> None:
        """Runs pb.StateCopy items (prefix-cache restores or snapshots); StepError for a slot outside the pool."""
        src = [c.src_slot for c in copies]
        dst = [c.dst_slot for c in copies]
        for slot in src + dst:
            if not 0 <= slot < self.cache.num_slots:
                raise StepError(f"state copy slot {slot} outside [0, {self.cache.num_slots})")
        self.cache.copy_slots(src, dst)

    def _state(self, req_id: str) -> SamplingState:
        state = self.states.get(req_id)
        if state is None:
            raise StepError(f"row for request {req_id!r} that was never sent as a NewRequest")
        return state

    def build_batch(self, step) -> ForwardBatch:
        """PackedStep -> ForwardBatch (tensors on the cache's device). Raises StepError on inconsistent rows."""
        num_tokens = sum(row.num_tokens for row in step.rows)
        if num_tokens != len(step.token_ids):
            raise StepError(f"rows claim {num_tokens} tokens, step carries {len(step.token_ids)}")
        _check_slots(step)
        rows, offset = [], 0
        for row in step.rows:
            toks = list(step.token_ids[offset:offset + row.num_tokens])
            offset += row.num_tokens
            if not 0 <= row.state_slot < self.cache.num_slots:
                raise StepError(f"row {row.req_id!r}: state slot {row.state_slot} outside [0, {self.cache.num_slots})")
            try:
                self.tables.update(row)
            except BlockTableError as exc:
                raise StepError(str(exc)) from exc
            rows.append((toks, row.context_len, row.state_slot, row.sample))
        try:
            block_tables, num_blocks = self.tables.gather([row.state_slot for row in step.rows])
            batch = ForwardBatch.from_table(rows, self.cache.block_size, torch.from_numpy(block_tables), num_blocks)
        except ValueError as exc:
            raise StepError(str(exc)) from exc
        device = self.cache.device
        return batch if device.type == "cpu" else batch.to(device, non_blocking=True)
