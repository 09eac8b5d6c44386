"""Scheduler process: the paged KV block pool of the attention layers (block ids only, no tensors)."""
from collections import deque


class BlockPoolError(Exception):
    """A block was freed twice or was never handed out: a scheduler bug, not bad input."""


class BlockManager:
    """Hands out KV block ids; a request's block table grows as its tokens are computed.

    Blocks are refcounted: a full block may be shared by several holders (prefix-cache entries and the requests
    that hit them, scheduler/prefix_cache.py); it returns to the free list when its last holder frees it.
    """

    def __init__(self, num_blocks: int, block_size: int):
        if block_size <= 0 or num_blocks < 0:
            raise ValueError(f"bad KV pool: {num_blocks} blocks of {block_size} tokens")
        self.num_total_blocks = num_blocks
        self.block_size = block_size
        self.free_block_ids = deque(range(num_blocks))
        self._refs = {}            # block id -> holders (>= 1) of every block in use

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_ids)

    @property
    def usage(self) -> float:
        """Fraction of blocks in use, [0, 1]."""
        if not self.num_total_blocks:
            return 0.0
        return 1.0 - self.num_free_blocks / self.num_total_blocks

    def num_blocks_needed(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def refcount(self, block_id: int) -> int:
        """Holders of `block_id` (0 = free)."""
        return self._refs.get(block_id, 0)

    def grow(self, block_ids: list, num_tokens: int) -> bool:
        """Appends blocks to `block_ids` until they cover `num_tokens`; False (and no change) if too few are free."""
        num_new = self.num_blocks_needed(num_tokens) - len(block_ids)
        if num_new <= 0:
            return True
        if num_new > len(self.free_block_ids):
            return False
        for _ in range(num_new):
            block_id = self.free_block_ids.popleft()
            self._refs[block_id] = 1
            block_ids.append(block_id)
        return True

    def share(self, block_ids: list) -> list:
        """One more holder for each block of `block_ids` (all in use); returns a new list of the same ids."""
        for block_id in block_ids:
            if block_id not in self._refs:
                raise BlockPoolError(f"block {block_id} shared but not in use")
        for block_id in block_ids:
            self._refs[block_id] += 1
        return list(block_ids)

    def free(self, block_ids: list) -> None:
        """Drops one holder of every block of `block_ids` and empties the list; unheld blocks go back to the pool."""
        for block_id in block_ids:
            refs = self._refs.get(block_id, 0)
            if refs <= 0:
                raise BlockPoolError(f"block {block_id} freed but not in use")
            if refs == 1:
                del self._refs[block_id]
                self.free_block_ids.append(block_id)
            else:
                self._refs[block_id] = refs - 1
        block_ids.clear()
