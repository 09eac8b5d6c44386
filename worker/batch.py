"""Worker process: the packed batch one model forward runs on (the contract between model_runner and the model).

Letters used in shapes throughout the worker and kernels:
  T  packed tokens in this step (prefill chunks and decode rows of all sequences, concatenated)
  N  sequences (rows) in this step
  B  max KV blocks per sequence in the block table
  S  GDN state slots in the pool;  Lg GDN layers;  La attention layers
"""
from dataclasses import dataclass

import torch


def to_device(values, device, dtype=None) -> torch.Tensor:
    """A small host list (or CPU tensor) on `device` without waiting for the device's queued work: a plain
    torch.tensor(..., device=cuda) copy synchronises the stream, which would stall the worker's pipelined steps
    (worker/pipeline.py) behind the step already running."""
    host = values if isinstance(values, torch.Tensor) else torch.tensor(values, dtype=dtype)
    return host.to(device, non_blocking=True)


@dataclass
class HostRows:
    """Host copies (lists of int) of a batch's row metadata, so that preparing a step on the device reads nothing
    back from it: bounds = cu_seqlens [N+1], context_lens [N], state_slots [N]."""

    bounds: list
    context_lens: list
    state_slots: list


_TENSORS = ("input_ids", "positions", "cu_seqlens", "context_lens", "state_slots", "block_tables", "logits_rows")


@dataclass
class ForwardBatch:
    """One packed step.

    input_ids     [T] int64   token ids, rows concatenated in row order
    positions     [T] int64   absolute position of each token in its own sequence
    cu_seqlens    [N+1] int32 row r owns tokens cu_seqlens[r]:cu_seqlens[r+1]
    context_lens  [N] int32   tokens already in the KV cache / GDN state before this row; 0 means a
                              fresh sequence, whose recurrent and conv state start from zero
    state_slots   [N] int64   GDN state slot of each row (recurrent + conv state), any order, not contiguous
    block_tables  [N, B] int32 KV block ids of each row; entries past the row's need are -1
    logits_rows   [M] int64   rows whose last token needs logits (M <= N), ascending
    host          HostRows of cu_seqlens / context_lens / state_slots (from_rows sets it; None: read from the
                  tensors when needed, one device-to-host copy each)
    """

    input_ids: torch.Tensor
    positions: torch.Tensor
    cu_seqlens: torch.Tensor
    context_lens: torch.Tensor
    state_slots: torch.Tensor
    block_tables: torch.Tensor
    logits_rows: torch.Tensor
    host: HostRows = None

    @property
    def num_rows(self) -> int:
        """Requests in the batch (N: cu_seqlens is [N+1])."""
        return int(self.cu_seqlens.numel()) - 1

    @property
    def num_tokens(self) -> int:
        """Tokens run this step (T: input_ids is [T])."""
        return int(self.input_ids.numel())

    def to(self, device, non_blocking: bool = False) -> "ForwardBatch":
        """The batch with its tensors on `device` (non_blocking as Tensor.to); the host rows are kept."""
        tensors = (getattr(self, name).to(device, non_blocking=non_blocking) for name in _TENSORS)
        return ForwardBatch(*tensors, host=self.host)

    def host_rows(self) -> HostRows:
        """`host`, or the same lists read from the tensors where the batch was built without them (on CUDA each
        read waits for the device's queued work)."""
        if self.host is not None:
            return self.host
        return HostRows(self.cu_seqlens.tolist(), self.context_lens.tolist(), self.state_slots.tolist())

    def seq_lens(self) -> torch.Tensor:
        """[N] int32 tokens of each row in this step."""
        return self.cu_seqlens[1:] - self.cu_seqlens[:-1]

    def last_token_index(self) -> torch.Tensor:
        """[M] int64 index into the T dimension of the last token of each row in logits_rows."""
        return (self.cu_seqlens[1:].long() - 1)[self.logits_rows]

    @staticmethod
    def from_rows(rows, block_size: int) -> "ForwardBatch":
        """Builds a batch from (token_ids, context_len, state_slot, block_ids, want_logits) tuples.

        Convenience for tests and the CPU runner; raises ValueError if a row has no tokens or its
        block table is too short for context_len + len(token_ids) tokens.
        """
        tables = [list(blocks) for _, _, _, blocks, _ in rows]
        width = max(1, max(len(t) for t in tables))
        table = torch.full((len(rows), width), -1, dtype=torch.int32)
        for r, t in enumerate(tables):
            table[r, : len(t)] = torch.tensor(t, dtype=torch.int32)
        return ForwardBatch.from_table([(toks, ctx, slot, logits) for toks, ctx, slot, _, logits in rows], block_size,
                                       table, [len(t) for t in tables])

    @staticmethod
    def from_table(rows, block_size: int, block_tables: torch.Tensor, num_blocks: list) -> "ForwardBatch":
        """Builds a batch from (token_ids, context_len, state_slot, want_logits) tuples and their block tables
        ([N, B] int32, -1 past row r's num_blocks[r] ids: worker/block_tables.py keeps them between steps); raises
        ValueError as from_rows."""
        ids, pos, cu, ctx, slots, want = [], [], [0], [], [], []
        for r, (toks, context_len, slot, logits) in enumerate(rows):
            if not toks:
                raise ValueError(f"row {r} has no tokens")
            need = -(-(context_len + len(toks)) // block_size)
            if num_blocks[r] < need:
                raise ValueError(f"row {r}: {num_blocks[r]} blocks cover fewer than {context_len + len(toks)} tokens")
            ids.extend(toks)
            pos.extend(range(context_len, context_len + len(toks)))
            cu.append(cu[-1] + len(toks))
            ctx.append(context_len)
            slots.append(slot)
            if logits:
                want.append(r)
        return ForwardBatch(
            input_ids=torch.tensor(ids, dtype=torch.int64),
            positions=torch.tensor(pos, dtype=torch.int64),
            cu_seqlens=torch.tensor(cu, dtype=torch.int32),
            context_lens=torch.tensor(ctx, dtype=torch.int32),
            state_slots=torch.tensor(slots, dtype=torch.int64),
            block_tables=block_tables,
            logits_rows=torch.tensor(want, dtype=torch.int64),
            host=HostRows(cu, ctx, slots),
        )
