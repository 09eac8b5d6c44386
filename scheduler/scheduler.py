"""Scheduler process: the continuous-batching policy (one token budget per step), pure Python, no sockets, no torch.

Each step, like vLLM v1 (there is no prefill phase and no decode phase):
  1. running requests that decode (one token each), oldest first, so a long prefill never starves them;
  2. running requests part-way through a chunked prefill, continuing where the last chunk stopped;
  3. waiting requests, first come first served (a lower vLLM `priority` first: scheduler/waiting.py), while the
     token budget, max_num_seqs, a free GDN state slot and enough KV blocks allow (KV blocks for the whole prompt, as
     vLLM's admission asks, plus one spare block per running request); the last prefill chunk may be cut to fit.
When a running request needs a KV block and none is free, the most recently admitted request that has no row in this
step yet (of the highest `priority` value, unless the request itself is less urgent) is preempted by recompute: it
frees slot and blocks and goes back to the front of the queue (of its priority); on resume it prefills prompt +
generated tokens and the worker continues its sampling state from NewRequest.output_token_ids.
Prefix cache (scheduler/prefix_cache.py): a waiting request whose prompt starts with a cached entry shares its KV
blocks and starts at its end, the snapshot copied into its slot; prefill chunks end at the cache's split points and
snapshots are taken there. Entries give way (least recently used first) before any request is preempted or refused.
"""
from bisect import bisect_right

from proto import pb
from scheduler import preemption
from scheduler.block_manager import BlockManager
from scheduler.limits import SchedulerLeakError, SchedulerLimits
from scheduler.prefix_cache import PrefixCache, PrefixCacheConfig
from scheduler.request import FINISHED, RUNNING, WAITING, Request
from scheduler.state_pool import StatePool
from scheduler.step_outputs import StepOutputs
from scheduler.waiting import WaitingQueue


class Scheduler:
    def __init__(self, limits: SchedulerLimits, num_blocks: int, block_size: int, num_slots: int,
                 max_context_len: int, clock=None, prefix_cache: PrefixCacheConfig = None):
        self.limits = limits
        self.prefix_config = prefix_cache or PrefixCacheConfig(enabled=False)
        self.waiting = WaitingQueue()
        self.running = []
        self.requests = {}
        self.num_preemptions = 0
        self.step_id = 0
        self.session_id = ""
        self._finished_for_worker = []
        self._seating = False        # this schedule() seats the head of the queue (Scheduler.head_fits)
        self._clock = clock or (lambda: 0)
        # The result side is a part, not a base (house rule: no mixins): update() and fail_running() are its.
        self.outputs = StepOutputs(self)
        self.update, self.fail_running = self.outputs.update, self.outputs.fail_running
        self.reset_pools(num_blocks, block_size, num_slots, max_context_len)

    def reset_pools(self, num_blocks: int, block_size: int, num_slots: int, max_context_len: int) -> None:
        """Sizes the pools for a (new) worker; call only when no request holds blocks or slots."""
        self.block_manager = BlockManager(num_blocks, block_size)
        self.state_pool = StatePool(num_slots)
        self.prefix_cache = PrefixCache(self.prefix_config, self.block_manager, self.state_pool)
        # A request can never grow past the whole KV pool, so that bounds the context as well.
        self.max_context_len = min(max_context_len, num_blocks * block_size)
        self._finished_for_worker = []

    @property
    def max_num_seqs(self) -> int:
        """Requests that can run at once: max_num_seqs, at most the worker's GDN state slots (one per running request),
        as SGLang caps max_running_requests by its mamba state pool (model_runner_kv_cache_mixin.init_memory)."""
        num_slots = self.state_pool.num_total_slots
        return min(self.limits.max_num_seqs, num_slots) if num_slots else self.limits.max_num_seqs

    @property
    def num_waiting(self) -> int:
        """Requests admitted and not yet holding a state slot."""
        return len(self.waiting)

    @property
    def num_running(self) -> int:
        """Requests holding a state slot (prefilling or decoding)."""
        return len(self.running)

    def has_work(self) -> bool:
        """Whether any request is waiting or running."""
        return bool(self.waiting or self.running)

    def add_request(self, req: Request) -> None:
        """Queues an admitted request (admission checks ran before)."""
        req.status = WAITING
        self.requests[req.req_id] = req
        self.waiting.add(req)

    def abort(self, req_id: str, reason: str = "abort") -> Request | None:
        """Removes a waiting or running request and frees its slot and blocks now; None if unknown.
        `reason` becomes its finish_reason: "abort" (client gone) or the gateway's ("stop": stop string)."""
        req = self.requests.get(req_id)
        if req is None:
            return None
        if req.status == WAITING:
            self.waiting.remove(req)
        elif req.status == RUNNING:
            self.running.remove(req)
        self._finish(req, reason)
        return req

    def abort_all(self) -> list:
        """Aborts every request (the worker is gone); returns them."""
        reqs = list(self.requests.values())
        for req in reqs:
            self.abort(req.req_id)
        self._finished_for_worker = []
        return reqs

    def self_check(self) -> None:
        """Raises SchedulerLeakError if nothing runs but blocks or slots are held by anything but the prefix cache."""
        if self.has_work():
            return
        leak = self.prefix_cache.leak()
        if leak:
            raise SchedulerLeakError(f"idle with {leak}")

    def schedule(self) -> "pb.PackedStep | None":
        """Plans the next packed step; None when there is nothing to run."""
        step = pb.PackedStep(session_id=self.session_id)
        budget = self.limits.max_num_batched_tokens
        scheduled = set()
        decodes = [r for r in self.running if r.is_decoding]
        prefills = [r for r in self.running if not r.is_decoding]
        num_preemptions = self.num_preemptions
        budget = self._schedule_running(step, decodes, budget, scheduled)
        # While a request waits for a seat, running prefills take at most half the rest (vLLM's partial prefills),
        # unless the KV pool cannot take it yet: that half went unused (a 500-token prefill took 15 steps, not 8).
        # Seating it, the running prefills' snapshots leave the state slots of the free seats alone (_add_row).
        self._seating = num_preemptions == self.num_preemptions and self.head_fits()
        reserve = min(budget // 2, self.waiting[0].num_uncomputed_tokens) if self._seating else 0
        budget = self._schedule_running(step, prefills, budget - reserve, scheduled) + reserve
        # After a preemption the pool is short: admitting more would only preempt again.
        if num_preemptions == self.num_preemptions:
            self._admit_waiting(step, budget, scheduled)
        if not step.rows:
            return None
        return self.seal(step)

    def seal(self, step):
        """Numbers a planned step and hands it the finished requests the worker has not yet dropped (aborted /
        preempted requests' sampling state goes before this step's rows). Returns `step`."""
        step.finished_req_ids.extend(self._finished_for_worker)
        self._finished_for_worker = []
        self.step_id += 1
        step.step_id = self.step_id
        return step

    def _schedule_running(self, step, reqs: list, budget: int, scheduled: set) -> int:
        """Rows for running `reqs` in order within `budget`; returns the budget left."""
        for req in reqs:
            if budget == 0:
                break
            if req.status != RUNNING:
                continue
            num_new = self._chunk(req, budget)
            if preemption.reserve_blocks(self, req, num_new, scheduled):
                budget -= self._add_row(step, req, num_new, scheduled)
        return budget

    def _chunk(self, req: Request, budget: int) -> int:
        """Tokens of req's next row: what is left, at most `budget`, ending at the next prefix-cache split point."""
        num_new = min(req.num_uncomputed_tokens, budget)
        self._plan(req)
        start = req.num_computed_tokens
        i = bisect_right(req.split_points, start)
        return min(num_new, req.split_points[i] - start) if i < len(req.split_points) else num_new

    def _plan(self, req: Request) -> None:
        """Makes req's prefix-cache plan (its split and snapshot points) once."""
        if req.split_points is None:
            req.split_points, req.snapshot_points, req.checkpoint_grid = self.prefix_cache.plan(req.prompt_token_ids)

    def _lookup(self, req: Request):
        """The prefix-cache entry waiting `req` would start from, or None; prompt logprobs need every prompt position
        computed, so such a request never starts from the cache."""
        self._plan(req)
        if req.sampling.prompt_logprobs:
            return None
        return self.prefix_cache.lookup(req.prompt_token_ids, req.cache_salt, req.checkpoint_grid)

    def _admit_waiting(self, step, budget: int, scheduled: set) -> None:
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            req = self.waiting[0]
            hit = self._lookup(req)
            # The entry it would start from gives its state slot up too, last: a seat now, cold, beats a wait for one.
            if hit is not None and self.state_pool.num_free_slots == 0 and not self.prefix_cache.evict_one(keep=hit):
                hit = None
            num_new = self._take_pools(req, hit, budget)
            if not num_new:
                return
            self.waiting.popleft()
            req.state_slot = self.state_pool.allocate()
            resumed = req.num_preemptions > 0
            # One that cannot read the cache is no query, as vLLM's get_computed_blocks returns before its stats for a
            # request that skips reading the prefix cache.
            if not req.sampling.prompt_logprobs:
                self.prefix_cache.record(req.num_prompt_tokens, req.num_computed_tokens, resumed)
            # The first admission's hit stays the request's cached tokens (usage, prompt_tokens_cached), as vLLM's
            # Scheduler sets request.num_cached_tokens once: a resumed request's own re-lookup does not change it.
            if not resumed:
                req.num_cached_tokens = req.num_computed_tokens
            if hit is not None:
                step.restore_states.add(src_slot=hit.slot, dst_slot=req.state_slot)
            req.status = RUNNING
            if not req.first_scheduled_ns:
                req.first_scheduled_ns = self._clock()
            self.running.append(req)
            budget -= self._add_row(step, req, num_new, scheduled)

    def _take_pools(self, req: Request, hit, budget: int) -> int:
        """Makes room for waiting `req` (evicting prefix-cache entries other than `hit`, LRU first): a free state
        slot, `hit`'s blocks shared, blocks for its first chunk once its whole prompt fits. Returns that chunk's
        tokens; 0 (no change) if full."""
        while self.state_pool.num_free_slots == 0:
            if not self.prefix_cache.evict_one(keep=hit):
                return 0
        if hit is not None:
            req.block_ids = self.prefix_cache.use(hit)
            req.num_computed_tokens = hit.num_tokens
        num_new = self._chunk(req, budget)
        # Its whole prompt (a resumed request: prompt + output so far) must fit, not only the first chunk, with a
        # block to spare for each running request's next decode: a request admitted on its first chunk alone was
        # preempted again as soon as the others grew (50 prompts of 500 + 500 tokens in a 1600-token pool: 3983
        # preemptions, up to 114 of one request, 26 times the tokens computed). The blocks running requests have yet
        # to take for their own prompts (later prefill chunks) are theirs: a long prompt admitted alone in the pool lost
        # them to short requests admitted behind it, preempted itself for them and waited again, for ever while short
        # ones kept coming (tests/unit/test_scheduler_long_prompt.py).
        num_needed = self._num_blocks_to_admit(req)
        while self.block_manager.num_free_blocks < num_needed:
            if not self.prefix_cache.evict_one(keep=hit):
                self.block_manager.free(req.block_ids)
                req.num_computed_tokens = 0
                return 0
        self.block_manager.grow(req.block_ids, req.num_computed_tokens + num_new)
        return num_new

    def head_fits(self) -> bool:
        """Whether the first waiting request can be seated now: a seat is free (max_num_seqs) and the KV pool holds its
        whole prompt beside the running requests' (scheduler._num_blocks_to_admit), once prefix-cache entries give way,
        the blocks its prefix-cache hit shares with running requests not taken anew (as vLLM counts a hit's blocks
        computed, not to allocate: vllm/v1/core/sched/scheduler.py get_computed_blocks; counted anew, a request that
        needed 2 new blocks of 14 free waited, the lookahead going on, until the answer sharing them was done).
        No: the half-budget reserve for it and the lookahead's pause for it would only idle (scheduler/lookahead.py)."""
        if not self.waiting or len(self.running) >= self.max_num_seqs:
            return False
        req, blocks = self.waiting[0], self.block_manager
        room, num_needed = blocks.num_free_blocks + blocks.num_cached_only, self._num_blocks_to_admit(req)
        hit = self._lookup(req) if num_needed > room else None
        if hit is not None:
            # Admission shares the hit's blocks rather than taking new ones (those only entries hold then stay put).
            num_needed -= sum(blocks.refcount(b) > blocks.cached_refcount(b) for b in hit.block_ids)
        return num_needed <= room

    def _num_blocks_to_admit(self, req: Request) -> int:
        """Free KV blocks waiting `req` needs to be admitted: its whole prompt (a resumed one's output too) past the
        blocks it shares, a spare for each running request's next decode, and the blocks the running prefills still
        need for the rest of their prompts (later chunks)."""
        blocks = self.block_manager
        promised = sum(max(0, blocks.num_blocks_needed(r.num_tokens) - len(r.block_ids))
                       for r in self.running if not r.is_decoding)
        return blocks.num_blocks_needed(req.num_tokens) - len(req.block_ids) + len(self.running) + promised

    def _add_row(self, step, req: Request, num_new: int, scheduled: set) -> int:
        # Built in place (add), not made apart and appended: append copies the message (bench/scheduler_host.py).
        if not req.sent_to_worker:
            step.new_requests.add(
                req_id=req.req_id, sampling=req.sampling, prompt_token_ids=req.prompt_token_ids,
                output_token_ids=req.output_token_ids, constraint=req.constraint,
                min_tokens_stop_ids=req.min_tokens_stop_ids)
            req.sent_to_worker = True
        start = req.num_computed_tokens
        table_start, block_ids = req.take_block_table()
        step.rows.add(req_id=req.req_id, num_tokens=num_new, context_len=start, state_slot=req.state_slot,
                      block_table=block_ids, block_table_start=table_start, sample=start + num_new == req.num_tokens)
        step.token_ids.extend(req.token_slice(start, start + num_new))
        req.num_computed_tokens = start + num_new
        scheduled.add(req.req_id)
        # A pending entry cannot give way: it takes no state slot a request still to be seated in this step needs.
        seats = min(len(self.waiting), self.max_num_seqs - len(self.running)) if self._seating else 0
        snapshot_slot = self.prefix_cache.snapshot(req, req.num_computed_tokens, seats)
        if snapshot_slot >= 0:
            step.snapshot_states.add(src_slot=req.state_slot, dst_slot=snapshot_slot)
        return num_new

    def _release(self, req: Request) -> None:
        self.block_manager.free(req.block_ids)
        # The worker's table for the slot goes with the slot: the request's next row (after a resume) carries it whole.
        req.num_blocks_sent = 0
        if req.state_slot >= 0:
            self.state_pool.free(req.state_slot)
            req.state_slot = -1
        req.num_computed_tokens = 0
        if req.sent_to_worker:
            self._finished_for_worker.append(req.req_id)
            req.sent_to_worker = False

    def _finish(self, req: Request, reason: str, stop_token_id: int = -1) -> None:
        self._release(req)
        req.status = FINISHED
        req.finish_reason = reason
        req.stop_token_id = stop_token_id
        self.requests.pop(req.req_id, None)
