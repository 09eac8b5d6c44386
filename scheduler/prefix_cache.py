"""Scheduler process: the automatic prefix cache (research/seed-engine.md 3.4), pure Python, no torch.

An entry is a prompt prefix (token ids, a whole number of KV blocks), the KV blocks that hold it (shared through
the block manager's refcounts, so a hit copies no KV) and one GDN state slot holding the recurrent + conv state
right after its last token (a snapshot: the worker copies a row's slot into it, PackedStep.snapshot_states).
A request whose prompt has a cached entry as a proper prefix shares the blocks, gets the snapshot copied into its
own slot (PackedStep.restore_states) and prefills from there.

Checkpoints (where snapshots are taken): the first `<|im_start|>` at or past min_tokens (system prompt + tools) and
the last `<|im_start|>` (the previous turns), each rounded down to the KV block size. So that a hit gives the
same bits as a cold run, a prefill chunk ends at EVERY block-rounded `<|im_start|>` position >= min_tokens
(split points): the chunks of any prompt then depend on its tokens only, never on which prefix was cached.
A prompt with no such `<|im_start|>` (the text of a raw completion, /v1/completions, Ollama's raw /api/generate,
llama.cpp's /completion) is checkpointed on a grid instead: its split points are the multiples of the grid step
below its length, its snapshots the first and the last (vLLM caches any prompt, by block). Grid entries are kept apart
from anchor ones (their key says which), since the two kinds chunk the tokens before a checkpoint differently.
Limits: max_entries entries, snapshot slots <= half the state pool, cached KV blocks <= half the KV pool; LRU
eviction, and entries give way (LRU first) before a running request is preempted or a waiting one refused.
"""
import json
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field

ANCHOR_TOKEN = "<|im_start|>"
# The least grid step (tokens) of an anchorless prompt, whatever min_tokens says: each step ends a prefill chunk, and a
# small min_tokens (a test's 32) would cut a long raw prompt's prefill into tiny steps.
MIN_GRID_TOKENS = 256


@dataclass
class PrefixCacheConfig:
    enabled: bool = True
    max_entries: int = 32         # entries (= GDN snapshot slots) at most
    min_tokens: int = 1024        # shortest prefix (tokens) worth a checkpoint
    anchor_token_id: int = -1     # `<|im_start|>` id; -1 = none known: no checkpoints, the cache stays empty


def anchor_token_id(card: dict) -> int:
    """The `<|im_start|>` id from the model card's tokenizer.json (bytes) added_tokens; -1 when absent."""
    raw = card.get("tokenizer_json")
    if not raw:
        return -1
    try:
        added = json.loads(raw).get("added_tokens") or []
    except (ValueError, AttributeError):
        return -1
    return next((int(t["id"]) for t in added if isinstance(t, dict) and t.get("content") == ANCHOR_TOKEN), -1)


def plan_checkpoints(prompt: list, anchor: int, min_tokens: int, block_size: int) -> tuple:
    """Returns (split_points, snapshot_points): ascending prefix lengths (tokens, multiples of block_size,
    >= max(min_tokens, block_size), < len(prompt)) where a prefill chunk must end / a snapshot is taken."""
    if anchor < 0:
        return [], ()
    floor = max(min_tokens, block_size)
    points = sorted({p - p % block_size for p, t in enumerate(prompt) if t == anchor and p >= floor})
    points = [p for p in points if p >= floor]
    if not points:
        return [], ()
    return points, tuple(sorted({points[0], points[-1]}))


def plan_grid(num_tokens: int, min_tokens: int, block_size: int) -> tuple:
    """(split_points, snapshot_points) of an anchorless prompt of `num_tokens`: the multiples below it of the grid step
    (min_tokens, at least MIN_GRID_TOKENS and a block, rounded up to whole blocks); snapshots at the first and last."""
    step = -(-max(min_tokens, MIN_GRID_TOKENS, block_size) // block_size) * block_size
    points = list(range(step, num_tokens, step))
    return points, tuple(sorted({points[0], points[-1]})) if points else ()


def _key(tokens) -> bytes:
    return array("i", tokens).tobytes()


def entry_key(salt: str, grid: bool, tokens) -> tuple:
    """An entry's key: the request's cache_salt (vLLM mixes it into the first block's hash, so requests of different
    salts never share an entry), whether its checkpoints are a grid's, and the prefix's token ids."""
    return salt, grid, _key(tokens)


@dataclass(eq=False)
class PrefixEntry:
    key: tuple                    # (cache_salt, grid checkpoints, int32 prefix ids in native byte order): entry_key
    num_tokens: int               # prefix length, a multiple of the block size
    block_ids: list               # KV blocks covering the prefix (one reference held by this entry)
    slot: int                     # GDN snapshot slot
    ready: bool = False           # False until the step that writes blocks and snapshot has come back


@dataclass
class PrefixCacheStats:
    num_query_tokens: int = 0     # prompt tokens of admitted requests looked up (vLLM prefix_cache_queries)
    num_hit_tokens: int = 0       # of those, tokens served from the cache (vLLM prefix_cache_hits)
    # Lookups of requests resumed after a preemption, counted apart as vLLM does (not exported): a victim that
    # finds its own prefix again must not raise the hit rate, nor its re-lookups lower it.
    num_preempted_query_tokens: int = 0
    num_preempted_hit_tokens: int = 0
    num_evictions: int = 0


@dataclass
class PrefixCache:
    """The entries of one worker's pools; `blocks` is the BlockManager, `slots` the StatePool they come from."""

    config: PrefixCacheConfig
    blocks: object
    slots: object
    entries: OrderedDict = field(default_factory=OrderedDict)   # key -> PrefixEntry, least recently used first
    stats: PrefixCacheStats = field(default_factory=PrefixCacheStats)
    pending: list = field(default_factory=list)                 # entries the step in flight writes

    @property
    def enabled(self) -> bool:
        """On when configured, the tokenizer has an anchor token and the pool leaves it a slot."""
        return self.config.enabled and self.config.anchor_token_id >= 0 and self.max_slots > 0

    @property
    def max_slots(self) -> int:
        """State slots the cache may hold: max_entries, at most half the pool's slots."""
        return min(self.config.max_entries, self.slots.num_total_slots // 2)

    @property
    def num_entries(self) -> int:
        """Cached prefixes held now."""
        return len(self.entries)

    @property
    def num_cached_blocks(self) -> int:
        """Distinct KV blocks the entries hold."""
        return self.blocks.num_cached_blocks

    def plan(self, prompt: list) -> tuple:
        """(split_points, snapshot_points, grid) of a prompt: its anchors' checkpoints, else (grid True) a grid's;
        nothing when the cache is off."""
        if not self.enabled:
            return [], (), False
        cfg, block_size = self.config, self.blocks.block_size
        split_points, snapshot_points = plan_checkpoints(prompt, cfg.anchor_token_id, cfg.min_tokens, block_size)
        if split_points:
            return split_points, snapshot_points, False
        return (*plan_grid(len(prompt), cfg.min_tokens, block_size), True)

    def lookup(self, prompt: list, salt: str = "", grid: bool = False) -> "PrefixEntry | None":
        """The ready entry of `salt` and of `grid` checkpoints (the prompt's own kind) that is the longest proper
        prefix of `prompt`, or None. No side effects."""
        if not self.entries:
            return None
        buf = _key(prompt)
        for num_tokens in sorted({e.num_tokens for e in self.entries.values()}, reverse=True):
            if num_tokens >= len(prompt):
                continue
            entry = self.entries.get((salt, grid, buf[:4 * num_tokens]))
            if entry is not None and entry.ready:
                return entry
        return None

    def use(self, entry: PrefixEntry) -> list:
        """Marks `entry` most recently used; returns its block ids with one more reference (for the request)."""
        self.entries.move_to_end(entry.key)
        return self.blocks.share(entry.block_ids)

    def record(self, num_prompt_tokens: int, num_hit_tokens: int, preempted: bool = False) -> None:
        """Counts one admitted request's lookup (tokens), as vLLM does: a resumed one (`preempted`) apart; nothing
        while the cache is off."""
        if not self.enabled:
            return
        stats = self.stats
        if preempted:
            stats.num_preempted_query_tokens += num_prompt_tokens
            stats.num_preempted_hit_tokens += num_hit_tokens
            return
        stats.num_query_tokens += num_prompt_tokens
        stats.num_hit_tokens += num_hit_tokens

    def evict_one(self, keep: "PrefixEntry | None" = None) -> bool:
        """Drops the least recently used ready entry other than `keep`: its slot and block references go back.
        False when no entry can go (pending entries are written by the step in flight and stay)."""
        victim = next((e for e in self.entries.values() if e.ready and e is not keep), None)
        if victim is None:
            return False
        self._drop(victim)
        self.stats.num_evictions += 1
        return True

    def clear(self) -> int:
        """Drops every ready entry (pending ones stay until their step is back); returns how many went. Safe at
        any time, as evict_one: a request that hit an entry holds its own references to the blocks."""
        num_dropped = 0
        while self.evict_one():
            num_dropped += 1
        return num_dropped

    def snapshot(self, req, end: int, keep_slots: int = 0) -> int:
        """Called when `req`'s row in the step being planned ends at token `end`: when `end` is one of its
        snapshot points and the prefix is not cached yet, creates a pending entry (evicting LRU entries to make
        room, none for a prefix of more blocks than the cache may hold) and returns its snapshot slot; else -1.
        `keep_slots` state slots stay free for requests seated in the same step: a pending entry never gives way,
        so a snapshot that took the last slot kept a waiting request that fits out of its seat for a step."""
        if end not in req.snapshot_points or not self.enabled:
            return -1
        key = entry_key(req.cache_salt, req.checkpoint_grid, req.token_slice(0, end))
        if key in self.entries:
            return -1
        block_ids = req.block_ids[:end // self.blocks.block_size]
        # past the blocks the cache may hold at all it would never fit: evicting the entries first only emptied it
        if len(block_ids) > self.blocks.num_total_blocks // 2:
            return -1
        # nor past the slots the requests seated in this step keep, whatever goes (each eviction frees one slot)
        if self.slots.num_free_slots + sum(e.ready for e in self.entries.values()) <= keep_slots:
            return -1
        while not self._fits(block_ids, keep_slots):
            if not self.evict_one():
                return -1
        entry = PrefixEntry(key, end, self.blocks.share(block_ids, cached=True), self.slots.allocate())
        self.entries[key] = entry
        self.pending.append(entry)
        return entry.slot

    def _fits(self, block_ids: list, keep_slots: int) -> bool:
        num_new = sum(1 for b in block_ids if not self.blocks.cached_refcount(b))
        return (self.num_entries < self.max_slots and self.slots.num_free_slots > keep_slots
                and self.num_cached_blocks + num_new <= self.blocks.num_total_blocks // 2)

    def leak(self) -> str:
        """For an idle scheduler: "" when every KV block and state slot in use is held by entries alone, else
        what is held by something else."""
        blocks, slots = self.blocks, self.slots
        if blocks.num_free_blocks + self.num_cached_blocks != blocks.num_total_blocks or (
                blocks.num_cached_only != self.num_cached_blocks):
            return (f"{blocks.num_free_blocks} of {blocks.num_total_blocks} KV blocks free and "
                    f"{self.num_cached_blocks} held by the prefix cache")
        if slots.num_free_slots + self.num_entries != slots.num_total_slots:
            return (f"{slots.num_free_slots} of {slots.num_total_slots} state slots free and "
                    f"{self.num_entries} held by the prefix cache")
        return ""

    def commit(self) -> None:
        """The step in flight came back: its snapshots and KV blocks are written, the entries may serve hits."""
        for entry in self.pending:
            entry.ready = True
        self.pending = []

    def drop_pending(self) -> None:
        """The step in flight failed: its entries hold nothing valid."""
        for entry in self.pending:
            if self.entries.get(entry.key) is entry:
                self._drop(entry)
        self.pending = []

    def _drop(self, entry: PrefixEntry) -> None:
        del self.entries[entry.key]
        self.blocks.free(entry.block_ids, cached=True)
        self.slots.free(entry.slot)
