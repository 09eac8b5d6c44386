"""Worker process (GPU path): how a step's rows split for the Gated DeltaNet CUDA kernels, built once a step and
shared by every GDN layer (worker/layers/gdn.py)."""
from dataclasses import dataclass

import torch

from kernels.gdn import ops as gdn_ops
from worker.batch import to_device

# A step with a row of 2+ tokens and at most MIXED_CHUNKED_MAX_DECODE one-token (decode) rows runs those through the
# chunked kernels too, as one-token chunks, instead of gathering them out to the decode kernels and scattering both
# results back (six index kernels and the decode launches a layer: host time the piecewise prefill step waits on).
# H200, 27B shape, 64 layers, .devscripts probe of session 27 device run 7 (ms, split / chunked, two rounds): 15
# decode rows + a 16-token chunk: kernels 14.2 / 16.6, step wall 35.7-79.2 / 19.7-30.8; 31 + 64: kernels 21.0 /
# 26.6, wall 36.1-49.4 / 30.0-31.6; 7 + 512: 67 / 67, wall 71-72 both. Every extra decode row costs the chunked
# kernels ~0.18-0.22 ms a step, so past 16 rows the split wins now that it needs no gather / scatter where the decode
# rows lead the step (GdnStepMeta.num_leading_decode, session 28 device run 6, .devscripts/s28_mix3.py, pieces wall
# ms split / chunked, two rounds: 24 + 16 26.1, 25.7 / 23.1, 24.0; 31 + 64 24.7, 24.1 / 28.5, 28.6; 31 + 128 34.3,
# 34.4 / 41.0, 41.0; before those views run 4 had chunked 17-32 rows beside <= 128 tokens: 31 + 64 split 62.1,
# 37.9). False: always split.
MIXED_STEPS_CHUNKED = True
MIXED_CHUNKED_MAX_DECODE = 16


@dataclass
class GdnStepMeta:
    """Per-step row split for the CUDA kernels (kernels/gdn/ops.py), built once and shared by every GDN layer.

    decode_tokens  [Nd] int64   token index of each one-token row of an all-decode step, or of any step where
                                its decode rows are not chunked (row order); decode_slots [Nd] int32 its slot
    prefill_tokens [Tp] int64   tokens of the chunked rows (those of > 1 token, and the decode rows beside them up to
                                MIXED_CHUNKED_MAX_DECODE), in order; prefill_cu [Np+1] int32 their bounds
    prefill_slots  [Np] int32;  prefill_init [Np] int32 (1 = continue the slot's state, 0 = fresh prompt)
    tables         kernels.gdn.ops.prefill_tables of prefill_cu (None without prefill rows)
    all_decode / all_prefill  bool: no gather/scatter of tokens needed
    prefill_plan   kernels.gdn.prefill_plan.PrefillPlan the step's first GDN layer makes, the others reuse
    num_leading_decode  Nd where a split step's decode rows are its first Nd tokens (the scheduler plans decode rows
                        first): both parts are then row views, no gather / scatter; else 0
    decode_plan    kernels.gdn.decode_plan.DecodePlan of those decode rows, made by the first GDN layer
    """

    decode_tokens: torch.Tensor
    decode_slots: torch.Tensor
    prefill_tokens: torch.Tensor
    prefill_cu: torch.Tensor
    prefill_slots: torch.Tensor
    prefill_init: torch.Tensor
    tables: tuple
    all_decode: bool
    all_prefill: bool
    prefill_plan: object = None
    num_leading_decode: int = 0
    decode_plan: object = None

    @staticmethod
    def from_lists(bounds: list, context_lens: list, state_slots: list, device) -> "GdnStepMeta":
        """bounds (cu_seqlens [N+1]), context_lens [N], state_slots [N] as host lists."""
        lens = [hi - lo for lo, hi in zip(bounds[:-1], bounds[1:])]
        decode = [r for r, n in enumerate(lens) if n == 1]
        prefill = [r for r, n in enumerate(lens) if n > 1]
        if prefill and MIXED_STEPS_CHUNKED and len(decode) <= MIXED_CHUNKED_MAX_DECODE:  # one-token chunks
            decode, prefill = [], list(range(len(lens)))
        pre_tokens = [t for r in prefill for t in range(bounds[r], bounds[r + 1])]
        pre_cu = [0]
        for r in prefill:
            pre_cu.append(pre_cu[-1] + lens[r])

        def dev(values, dtype):
            return to_device(values, device, dtype)

        tables = gdn_ops.prefill_tables(pre_cu, device) if prefill else None
        return GdnStepMeta(dev([bounds[r] for r in decode], torch.int64), dev([state_slots[r] for r in decode],
                                                                              torch.int32),
                           dev(pre_tokens, torch.int64), dev(pre_cu, torch.int32),
                           dev([state_slots[r] for r in prefill], torch.int32),
                           dev([int(context_lens[r] > 0) for r in prefill], torch.int32), tables,
                           not prefill, not decode, None, len(decode) if decode == list(range(len(decode))) else 0)
