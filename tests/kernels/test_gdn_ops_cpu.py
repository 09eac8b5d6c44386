"""CPU tests of the GDN kernel wrappers (kernels/gdn/ops.py): import without CuPy, chunk tables, input checks.

The kernels themselves are checked on a GPU by test_gdn_cuda.py; these run everywhere (CI is CPU-only).
"""
import os
import subprocess
import sys

import pytest
import torch

from kernels.gdn import _decode, _launch, ops

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_import_needs_no_cupy():
    code = "import sys, kernels.gdn.ops; assert 'cupy' not in sys.modules and 'numpy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_chunk_tables_split_each_sequence_into_64_token_chunks():
    lens = [1, 63, 64, 65, 0, 130]
    bounds = [0]
    for n in lens:
        bounds.append(bounds[-1] + n)
    chunks, seq_chunks, num_chunks = ops.prefill_tables(bounds, "cpu")
    expect = [(0, 0, 1, 0), (1, 1, 63, 0), (2, 64, 64, 0), (3, 128, 64, 0), (3, 192, 1, 1),
              (5, 193, 64, 0), (5, 257, 64, 1), (5, 321, 2, 2)]
    assert num_chunks == len(expect)
    assert [tuple(r) for r in chunks.tolist()] == expect
    assert seq_chunks.tolist() == [0, 1, 2, 3, 5, 5, 8]
    assert chunks.dtype == torch.int32 and seq_chunks.dtype == torch.int32


def test_prefill_tables_accept_a_tensor():
    chunks, seq_chunks, num_chunks = ops.prefill_tables(torch.tensor([0, 100, 228]), "cpu")
    assert num_chunks == 4 and seq_chunks.tolist() == [0, 2, 4]
    assert chunks[3].tolist() == [1, 164, 64, 1]


def test_cpu_tensors_are_refused_with_a_typed_error():
    q = torch.randn(2, 4, 128).bfloat16()
    v = torch.randn(2, 12, 128).bfloat16()
    a = torch.randn(2, 12).bfloat16()
    pool = torch.randn(3, 12, 128, 128)
    with pytest.raises(ops.GdnKernelError, match="CUDA"):
        ops.fused_recurrent_decode(q, q, v, a, a, torch.zeros(12), torch.zeros(12), pool,
                                   torch.tensor([0, 2], dtype=torch.int32))


def test_shared_memory_budgets_fit_one_hopper_block():
    assert _launch.PREP_SMEM <= 48 * 1024
    assert _launch.STATE_SMEM <= 227 * 1024


def test_decode_variant_by_dtype_and_batch(monkeypatch):
    monkeypatch.setitem(_decode.DECODE_VARIANT, "bfloat16", "auto")
    monkeypatch.setitem(_decode.DECODE_VARIANT, "float32", "auto")
    assert _decode.decode_variant(torch.float32, 1) == "regs"
    assert _decode.decode_variant(torch.float32, _decode.WIDE_MIN_SEQS - 1) == "regs"
    assert _decode.decode_variant(torch.float32, _decode.WIDE_MIN_SEQS) == "tma3x1"
    assert _decode.decode_variant(torch.bfloat16, 1) == "t128x6"
    assert _decode.decode_variant(torch.bfloat16, _decode.WIDE_MIN_SEQS - 1) == "t128x6"
    assert _decode.decode_variant(torch.bfloat16, _decode.WIDE_MIN_SEQS) == "w128"
    assert _decode.decode_variant(torch.bfloat16, _decode.TMA_MIN_SEQS - 1) == "w128"
    assert _decode.decode_variant(torch.bfloat16, _decode.TMA_MIN_SEQS) == "tma3x2a"
    # SPARKINFER_GDN_DECODE_BF16=t128x6 at start-up: a named variant is kept at every batch size
    monkeypatch.setitem(_decode.DECODE_VARIANT, "bfloat16", "t128x6")
    assert _decode.decode_variant(torch.bfloat16, 64) == "t128x6"


def test_decode_variant_refuses_a_bf16_only_kernel_for_f32(monkeypatch):
    monkeypatch.setitem(_decode.DECODE_VARIANT, "float32", "w128")
    with pytest.raises(_launch.GdnKernelError, match="bf16-only"):
        _decode.decode_variant(torch.float32)
