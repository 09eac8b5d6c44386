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
        self._cached = {}          # block id -> how many of its holders are prefix-cache entries (>= 1)
        self.num_cached_only = 0   # blocks in use that only prefix-cache entries hold (no request)

    @property
    def num_free_blocks(self) -> int:
        """KV blocks on the free list: held by no request and no prefix-cache entry."""
        return len(self.free_block_ids)

    @property
    def num_cached_blocks(self) -> int:
        """Distinct blocks prefix-cache entries hold."""
        return len(self._cached)

    @property
    def usage(self) -> float:
        """Fraction of blocks requests hold, [0, 1]. A block only prefix-cache entries hold counts as free, as vLLM
        counts it: an entry gives way before a request waits for blocks, and an idle server reads 0, not the
        cache's size (up to half the pool)."""
        if not self.num_total_blocks:
            return 0.0
        return 1.0 - (self.num_free_blocks + self.num_cached_only) / self.num_total_blocks

    def num_blocks_needed(self, num_tokens: int) -> int:
        """Blocks of block_size tokens that hold num_tokens tokens (ceiling division)."""
        return -(-num_tokens // self.block_size)

    def refcount(self, block_id: int) -> int:
        """Holders of `block_id` (0 = free)."""
        return self._refs.get(block_id, 0)

    def cached_refcount(self, block_id: int) -> int:
        """Prefix-cache entries among the holders of `block_id`."""
        return self._cached.get(block_id, 0)

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

    def share(self, block_ids: list, cached: bool = False) -> list:
        """One more holder for each block of `block_ids` (all in use), a prefix-cache entry when `cached`; returns a
        new list of the same ids."""
        for block_id in block_ids:
            if block_id not in self._refs:
                raise BlockPoolError(f"block {block_id} shared but not in use")
        for block_id in block_ids:
            num_cached = self._cached.get(block_id, 0)
            if cached:
                self._cached[block_id] = num_cached + 1
            elif self._refs[block_id] == num_cached:
                self.num_cached_only -= 1      # only entries held it; now a request does too
            self._refs[block_id] += 1
        return list(block_ids)

    def free(self, block_ids: list, cached: bool = False) -> None:
        """Drops one holder (a prefix-cache entry when `cached`) of every block of `block_ids` and empties the list;
        unheld blocks go back to the pool."""
        for block_id in block_ids:
            refs, num_cached = self._refs.get(block_id, 0), self._cached.get(block_id, 0)
            num_requests = refs - num_cached
            if refs <= 0 or (num_cached <= 0 if cached else num_requests <= 0):
                holder = "an entry" if cached else "a request"
                raise BlockPoolError(f"block {block_id} freed but not in use by {holder}")
            if cached:
                if num_requests == 0 and num_cached == 1:
                    self.num_cached_only -= 1  # its last holder goes
                if num_cached == 1:
                    del self._cached[block_id]
                else:
                    self._cached[block_id] = num_cached - 1
            elif num_requests == 1 and num_cached:
                self.num_cached_only += 1      # the last request left it to the entries
            if refs == 1:
                del self._refs[block_id]
                self.free_block_ids.append(block_id)
            else:
                self._refs[block_id] = refs - 1
        block_ids.clear()
