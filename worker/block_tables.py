"""Worker process: each GDN state slot's KV block table, kept on the host between steps.

A StepRow carries its whole block table only when it is new to its slot (block_table_start 0: a first admission, a
resume after preemption, a prefix-cache hit) and otherwise just the ids its request gained since its last row, as
vLLM's workers keep each request's table (vllm/v1/worker/block_table.py) and take CachedRequestData.new_block_ids.
A 16k-token context is 1000 ids a row; sending them every step cost the scheduler 3-4 ms a step at 64 rows
(bench/scheduler_host.py long-context-64). The tables are rebuilt into the same `block_tables [N, B]` a whole table
per row gave (worker/batch.py), so nothing after the batch sees a difference.
"""
import numpy as np


class BlockTableError(Exception):
    """A row continues a table the worker does not hold (another request's slot, or another length), or names a KV
    block outside the pool."""


class SlotTables:
    """[S, B'] int32 block ids per state slot (-1 past each table's length, B' grown as needed), the length of each
    and the request that owns it."""

    def __init__(self, num_slots: int, num_blocks: int = 64, pool_blocks: int = 0):
        self.ids = np.full((num_slots, num_blocks), -1, dtype=np.int32)
        # KV blocks in the pool (0: not checked): a row's block id must be in [0, pool_blocks). A negative one indexed
        # the cache from its end (another request's block, silently) and one past it is an illegal address on CUDA.
        self.pool_blocks = pool_blocks
        self.lengths = np.zeros(num_slots, dtype=np.int64)
        self.owners = [""] * num_slots

    def clear(self) -> None:
        """Forgets every table (a new scheduler session, a step that failed part-way): the next row of each slot
        must carry its whole table."""
        self.ids.fill(-1)
        self.lengths.fill(0)
        self.owners = [""] * len(self.owners)

    def update(self, row) -> None:
        """Applies one pb.StepRow's block_table to its slot: a whole table (block_table_start 0) replaces the slot's,
        else the ids are appended to the table its request already holds there. BlockTableError when they do not
        continue it."""
        slot, start, new_ids = row.state_slot, row.block_table_start, row.block_table
        if self.pool_blocks and len(new_ids) and (min(new_ids) < 0 or max(new_ids) >= self.pool_blocks):
            bad = next(b for b in new_ids if not 0 <= b < self.pool_blocks)
            raise BlockTableError(f"row {row.req_id!r} names KV block {bad}, outside the pool [0, {self.pool_blocks})")
        if start == 0:
            self.ids[slot, :self.lengths[slot]] = -1
            self.owners[slot] = row.req_id
        elif self.owners[slot] != row.req_id or self.lengths[slot] != start:
            raise BlockTableError(
                f"row {row.req_id!r} continues its block table from {start} blocks, but slot {slot} holds "
                f"{self.lengths[slot]} of request {self.owners[slot]!r}")
        end = start + len(new_ids)
        if end > self.ids.shape[1]:
            self._grow(end)
        self.ids[slot, start:end] = new_ids
        self.lengths[slot] = end

    def _grow(self, num_blocks: int) -> None:
        width = max(num_blocks, 2 * self.ids.shape[1])
        grown = np.full((self.ids.shape[0], width), -1, dtype=np.int32)
        grown[:, :self.ids.shape[1]] = self.ids
        self.ids = grown

    def table(self, slot: int) -> list:
        """The block ids `slot` holds."""
        return self.ids[slot, :self.lengths[slot]].tolist()

    def gather(self, state_slots: list) -> tuple:
        """([N, B] int32 block ids, [N] table lengths) of the rows in `state_slots`: B is the longest table's length
        (at least 1), -1 past each row's own, as ForwardBatch.from_rows builds it."""
        slots = np.asarray(state_slots, dtype=np.int64)
        lengths = self.lengths[slots]
        width = max(1, int(lengths.max(initial=0)))
        # Fancy indexing copies: the batch does not change when a later step updates the tables.
        return self.ids[slots, :width], lengths.tolist()
