"""Scheduler process: the scheduler's per-step limits and the error its idle self-check raises."""
from dataclasses import dataclass


class SchedulerLeakError(Exception):
    """Idle self-check failed: blocks or slots are held while no request runs."""


@dataclass
class SchedulerLimits:
    max_num_batched_tokens: int = 2048  # tokens per step (prefill chunks + decode rows)
    max_num_seqs: int = 64              # rows per step / running requests; at most max_num_batched_tokens

    def __post_init__(self):
        # Every running request must fit its decode row into one step, or the youngest would never be scheduled.
        self.max_num_seqs = min(self.max_num_seqs, self.max_num_batched_tokens)
