"""Test helper: requests whose whole answer is known before they run, and a fake worker that gives it.

The token a request samples at position p (prompt + output so far = p tokens) is a hash of (req_id, p): any request's
output, finish reason and stop token follow from its spec alone (Spec.expected), whatever the scheduler did to it
(chunks, preemption and recompute, prefix-cache hits, lookahead steps). PositionWorker reads each packed step as the
worker does (worker/model_runner.py: finished_req_ids, new_requests, previous_token rows, state copies; worker/batch.py
and worker/block_tables.py: rows, positions, block tables), keeps each slot's token sequence and the KV pool token by
token (tests/unit/test_scheduler.py FakeWorker), and fails when a row's sequence is not its request's own."""
from dataclasses import dataclass
from types import SimpleNamespace

import torch

from proto import pb
from worker.model_runner import ModelRunner
from tests.unit.test_scheduler import VOCAB, FakeWorker

STOP_IDS = tuple(range(10))   # token ids a request may stop on; prompts never hold them
ANCHOR = VOCAB - 1            # stands for <|im_start|> (prefix-cache checkpoints)


def _mix(a: int, b: int) -> int:
    """A 64-bit hash of two integers (splitmix64 of their combination)."""
    x = (a * 0x9E3779B97F4A7C15 + b * 0xBF58476D1CE4E5B9 + 1) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


@dataclass
class Spec:
    """What a request is: its id's number `key`, prompt, max_tokens (0 = to the context), stop ids, min_tokens, the
    per-mille chance of a stop id at a position, and the output index at which the worker fails it (-1 never)."""
    req_id: str
    key: int
    prompt: list
    max_tokens: int
    stops: frozenset
    min_tokens: int = 0
    stop_rate: int = 20
    fail_at: int = -1

    def token(self, pos: int) -> int:
        """The token this request samples with `pos` tokens in its sequence (stops masked below min_tokens)."""
        h = _mix(self.key, pos)
        num_out = pos - len(self.prompt)
        if h % 1000 < self.stop_rate and num_out >= self.min_tokens:
            return STOP_IDS[(h >> 20) % len(STOP_IDS)]
        return 10 + (h >> 10) % (VOCAB - 11)

    def expected(self, max_context_len: int) -> tuple:
        """(output ids, finish reason, stop token id or -1) of this request run to its end."""
        out = []
        while True:
            if self.fail_at == len(out):
                return out, "error", -1
            token = self.token(len(self.prompt) + len(out))
            if token in self.stops:
                return out, "stop", token
            out.append(token)
            if (self.max_tokens and len(out) >= self.max_tokens) or len(self.prompt) + len(out) >= max_context_len:
                return out, "length", -1


class PositionWorker(FakeWorker):
    """FakeWorker whose sampled token is Spec.token of the row's request; checks every row's sequence against the
    request's prompt + expected output, and holds sampling states as the real worker does."""

    def __init__(self, specs: dict, num_slots: int, block_size: int, num_blocks: int, max_context_len: int):
        super().__init__(num_slots, block_size)
        self.max_context_len = max_context_len
        self.tables.pool_blocks = num_blocks
        self.specs = specs
        self.held = set()          # req_ids whose sampling state the worker holds
        self.sequences = {}        # req_id -> prompt + expected output (the only sequence its rows may hold)
        self.carry = {}            # req_id -> prompt positions its sampling state scored (False: none asked)

    def run(self, step) -> "pb.StepResult":
        for req_id in step.finished_req_ids:
            self.held.discard(req_id)
        for new in step.new_requests:
            assert new.req_id not in self.held, f"{new.req_id}: sent as new while the worker holds it"
            self.held.add(new.req_id)
            spec = self.specs[new.req_id]
            out, reason, _ = spec.expected(self.max_context_len)
            assert list(new.output_token_ids) == out[:len(new.output_token_ids)], f"{new.req_id}: output sent back"
            # the token it stopped or failed on too: a lookahead row planned before that was seen feeds it
            last = [spec.token(len(spec.prompt) + len(out))] if reason in ("stop", "error") else []
            self.sequences[new.req_id] = spec.prompt + out + last
            self.carry[new.req_id] = new.sampling.prompt_logprobs and 0   # prompt positions scored (its state's)
        self.check_copies(step)
        if step.rows:
            self.check_batch(step)
        result = pb.StepResult(step_id=step.step_id)
        self.copy(step.restore_states)
        offset, previous, self.previous = 0, self.previous, {}
        for row in step.rows:
            assert row.req_id in self.held, f"{row.req_id}: a row but no sampling state on the worker"
            assert row.num_tokens >= 1, f"{row.req_id}: empty row"
            toks = list(step.token_ids[offset:offset + row.num_tokens])
            offset += row.num_tokens
            if row.previous_token:
                assert row.num_tokens == 1 and toks == [-1], f"{row.req_id}: placeholder {toks}"
                assert row.req_id in previous, f"{row.req_id}: previous_token but nothing sampled in the last step"
                toks = [previous[row.req_id]]
            seq = () if row.context_len == 0 else self.state[row.state_slot][1]
            assert len(seq) == row.context_len, f"{row.req_id}: slot holds {len(seq)}, row says {row.context_len}"
            seq += tuple(toks)
            own = self.sequences[row.req_id]
            if list(seq) != own[:len(seq)]:
                pos = next((p for p in range(len(seq)) if p >= len(own) or seq[p] != own[p]))
                raise AssertionError(f"{row.req_id}: slot {row.state_slot} holds {seq[pos]} at {pos} of {len(seq)} "
                                     f"(row {row.context_len}+{row.num_tokens}), its own sequence "
                                     f"{own[pos] if pos < len(own) else 'ends'} (prompt {len(self.specs[row.req_id].prompt)})")
            self.attend(row, seq)
            self.state[row.state_slot] = (0, seq)
            self._score_prompt(row, result)
            if row.sample:
                self._sample(row.req_id, len(seq), result)
        assert offset == len(step.token_ids), f"step {step.step_id}: {len(step.token_ids)} ids for {offset} tokens"
        self.copy(step.snapshot_states)
        return result

    def _score_prompt(self, row, result) -> None:
        """worker/prompt_logprobs.py score_chunk: a row of a request that asked scores its prompt positions
        max(context_len, 1) .. end - 1; a chunk past 0 needs the previous chunk's carry in the same sampling state
        (PromptLogprobsError otherwise)."""
        prompt, done = self.specs[row.req_id].prompt, self.carry.get(row.req_id)
        if done is False or row.context_len >= len(prompt):
            return
        assert row.context_len == done, f"{row.req_id}: prompt chunk at {row.context_len}, its state scored {done}"
        first, end = max(row.context_len, 1), min(row.context_len + row.num_tokens, len(prompt))
        self.carry[row.req_id] = end
        if end > first:
            result.prompt_logprobs.add(req_id=row.req_id, first_position=first, token_ids=prompt[first:end],
                                       logprobs=[-1.0] * (end - first), ranks=[1] * (end - first))

    def _sample(self, req_id: str, pos: int, result) -> None:
        spec = self.specs[req_id]
        token = spec.token(pos)
        self.previous[req_id] = token   # every sampling row, a failed one too (model_runner.sample's index)
        if pos - len(spec.prompt) == spec.fail_at:
            result.failed_requests.add(req_id=req_id, error="grammar failed")
            return
        result.req_ids.append(req_id)
        result.token_ids.append(token)
        result.logprobs.append(-1.0)

    def check_batch(self, step) -> None:
        """The worker's own reading of the step (ModelRunner.build_batch: token count, slots, block tables applied
        to self.tables, ForwardBatch.from_table), and the batch's positions: each row's, from its context_len on."""
        runner = SimpleNamespace(tables=self.tables, cache=SimpleNamespace(
            num_slots=len(self.tables.owners), block_size=self.block_size, device=torch.device("cpu")))
        batch = ModelRunner.build_batch(runner, step)
        want = [p for row in step.rows for p in range(row.context_len, row.context_len + row.num_tokens)]
        assert batch.positions.tolist() == want and batch.num_rows == len(step.rows), f"step {step.step_id}: batch"
        assert batch.logits_rows.tolist() == [i for i, row in enumerate(step.rows) if row.sample]

    @staticmethod
    def check_copies(step) -> None:
        """worker/model_runner.py _check_slots and the proto's StateCopy rule: one row a slot, no snapshot into a
        row's slot, no copy's destination read by another copy of its list."""
        slots = [row.state_slot for row in step.rows]
        assert len(set(slots)) == len(slots), f"step {step.step_id}: two rows hold one state slot {slots}"
        assert len({row.req_id for row in step.rows}) == len(slots), f"step {step.step_id}: a request has two rows"
        snap_dst = {c.dst_slot for c in step.snapshot_states}
        assert not snap_dst & set(slots), f"step {step.step_id}: snapshot into a row's slot"
        for copies in (step.restore_states, step.snapshot_states):
            dst = [c.dst_slot for c in copies]
            assert len(set(dst)) == len(dst) and not set(dst) & {c.src_slot for c in copies}, f"{copies}"
        restored = {c.dst_slot for c in step.restore_states}
        fresh = {row.state_slot for row in step.rows if row.block_table_start == 0 and row.context_len > 0}
        assert restored <= set(slots), f"step {step.step_id}: restore into a slot no row runs"
        assert fresh <= restored, f"step {step.step_id}: a row starts past 0 in a slot new to it without a restore"
