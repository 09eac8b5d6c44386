"""Worker process (GPU path): vectorized paged attention metadata and decode attention over the KV block pool.

Letters as worker/batch.py: T packed tokens, N rows, B max blocks per row; Nd decode rows (one token each),
Lk padded key length of the decode rows (a multiple of the block size), nH query heads, nKV kv heads, hd head dim.
Decode rows are served by one gather of their keys and two batched matmuls (no Python loop per row); rows with
more than one token (prefill chunks) keep the per-row SDPA path of worker/layers/attention.py.
"""
from dataclasses import dataclass

import torch

from worker.batch import ForwardBatch, to_device


@dataclass
class PagedStepMeta:
    """Per-step KV addressing for the vectorized path, built once and shared by every attention layer.

    slot_mapping   [T] int64      flat pool index (block * block_size + offset) where each new token's K/V goes
    decode_tokens  [Nd] int64     token index (into T) of each decode row, row order
    key_index      [Nd, Lk] int64 flat pool index of key j of each decode row (0 where j is past the row's keys)
    key_valid      [Nd, Lk] bool  key j exists: j < context_len + 1
    prefill_rows   list of (lo, hi, key_index [n_kv] int64, mask [hi-lo, n_kv] bool) for rows of > 1 token
    all_decode     bool           every row is a decode row (decode_tokens is then arange(T))
    decode_tables  [Nd, B] int64  block table of each decode row (the paged decode kernel's addressing)
    num_keys       [Nd] int32     keys of each decode row: context_len + 1
    max_keys       int            a host bound on num_keys (Lk)
    num_leading_decode int        Nd when the decode rows are the step's first Nd tokens (as the scheduler plans
                                  them), else 0
    attn_plan      kernels.attention.step_plan.AttentionPlan the step's first attention layer makes (prefill or
                                  mixed steps on the fused path), the others reuse
    """

    slot_mapping: torch.Tensor
    decode_tokens: torch.Tensor
    key_index: torch.Tensor
    key_valid: torch.Tensor
    prefill_rows: list
    all_decode: bool
    decode_tables: torch.Tensor = None
    num_keys: torch.Tensor = None
    max_keys: int = 0
    num_leading_decode: int = 0
    attn_plan: object = None

    @staticmethod
    def from_batch(batch: ForwardBatch, block_size: int, bounds=None, context_lens=None) -> "PagedStepMeta":
        """bounds (cu_seqlens) and context_lens as host lists (read from the batch when None: one sync)."""
        device = batch.input_ids.device
        bounds = batch.cu_seqlens.tolist() if bounds is None else list(bounds)
        context_lens = batch.context_lens.tolist() if context_lens is None else list(context_lens)
        tables = batch.block_tables.long()
        positions = batch.positions.long()
        row_of_token = torch.repeat_interleave(torch.arange(batch.num_rows, device=device), batch.seq_lens().long(),
                                               output_size=batch.num_tokens)  # the size given: no device read
        slot_mapping = tables[row_of_token, positions // block_size] * block_size + positions % block_size
        decode = [r for r in range(len(context_lens)) if bounds[r + 1] - bounds[r] == 1]
        key_index, key_valid = decode_keys(tables, decode, context_lens, block_size, device)
        prefill_rows = []
        for r in (r for r in range(len(context_lens)) if bounds[r + 1] - bounds[r] > 1):
            lo, hi = bounds[r], bounds[r + 1]
            key_pos = torch.arange(context_lens[r] + hi - lo, device=device)
            index = tables[r, key_pos // block_size] * block_size + key_pos % block_size
            prefill_rows.append((lo, hi, index, key_pos[None, :] <= positions[lo:hi, None]))
        decode_tokens = to_device([bounds[r] for r in decode], device, torch.int64)
        rows = to_device(decode, device, torch.int64)
        num_keys = to_device([context_lens[r] + 1 for r in decode], device, torch.int32)
        leading = len(decode) if decode == list(range(len(decode))) else 0
        return PagedStepMeta(slot_mapping, decode_tokens, key_index, key_valid, prefill_rows,
                             len(decode) == len(context_lens), tables[rows], num_keys, key_index.shape[1], leading)


def decode_keys(tables: torch.Tensor, decode_rows: list, context_lens: list, block_size: int, device):
    """Key addressing of the decode rows: tables [N, B] int64, decode_rows (host list of row ids),
    context_lens (host list, all rows). Returns key_index [Nd, Lk] int64, key_valid [Nd, Lk] bool,
    Lk = max(context_len + 1) over the decode rows rounded up to block_size (at least one block)."""
    num_keys = [context_lens[r] + 1 for r in decode_rows]
    width = -(-max(num_keys + [1]) // block_size) * block_size
    key_pos = torch.arange(width, device=device)
    rows = to_device(decode_rows, device, torch.int64)
    blocks = tables[rows][:, key_pos // block_size]  # [Nd, Lk]
    key_valid = key_pos[None, :] < to_device(num_keys, device, torch.int64)[:, None]
    key_index = torch.where(key_valid, blocks * block_size + key_pos % block_size, torch.zeros_like(blocks))
    return key_index, key_valid


def decode_attention(q: torch.Tensor, flat_k: torch.Tensor, flat_v: torch.Tensor, key_index: torch.Tensor,
                     key_valid: torch.Tensor, scale: float) -> torch.Tensor:
    """One query token per row against its paged keys, GQA (query head h reads kv head h // (nH / nKV)).

    q [Nd, nH, hd]; flat_k, flat_v [num_blocks * block_size, nKV, hd] (the pools viewed flat); key_index,
    key_valid [Nd, Lk]. Each row's keys and values are gathered as whole pool rows (index_select, [Nd, Lk*nKV, hd])
    and each product is one batched GEMM over the rows: every query head meets every kv head (nKV x the
    arithmetic, which is negligible next to the bytes) and the kv head of each query head is picked out of the
    scores; for P V the probabilities are spread block-diagonally (exact zeros elsewhere). Scores are computed in
    q's dtype (as transformers' eager attention), masked and soft-maxed in fp32. Returns [Nd, nH, hd] in q's dtype.
    """
    num_rows, num_heads, head_dim = q.shape
    num_kv, width = flat_k.shape[1], key_index.shape[1]
    group = num_heads // num_kv
    flat_index = key_index.reshape(-1)
    keys = flat_k.reshape(flat_k.shape[0], -1).index_select(0, flat_index).to(q.dtype)
    values = flat_v.reshape(flat_v.shape[0], -1).index_select(0, flat_index).to(q.dtype)
    keys = keys.view(num_rows, width * num_kv, head_dim)  # row l * nKV + j: key l of kv head j
    values = values.view(num_rows, width * num_kv, head_dim)
    scores = torch.bmm(q, keys.transpose(1, 2)).view(num_rows, num_kv, group, width, num_kv)
    scores = scores.diagonal(dim1=1, dim2=4).permute(0, 3, 1, 2).float() * scale  # [Nd, nKV, g, Lk]
    scores = scores.masked_fill(~key_valid[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(q.dtype)
    eye = torch.eye(num_kv, dtype=q.dtype, device=q.device)
    spread = (probs[..., None] * eye[None, :, None, None, :]).reshape(num_rows, num_heads, width * num_kv)
    return torch.bmm(spread, values)
