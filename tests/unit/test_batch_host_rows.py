"""Unit tests (CPU): ForwardBatch keeps host copies of its row metadata (HostRows) through .to(), so the worker's
step preparation reads nothing back from the device (tests/kernels/test_model_gpu.py checks that on CUDA)."""
import torch

from worker.batch import ForwardBatch, HostRows

ROWS = [([3, 4, 5], 0, 6, [2, 9], True), ([7], 20, 1, [4, 0], False), ([8, 9], 31, 3, [5, 1, 7], True)]


def test_from_rows_sets_host_rows_equal_to_its_tensors():
    batch = ForwardBatch.from_rows(ROWS, 16)
    assert batch.host == HostRows([0, 3, 4, 6], [0, 20, 31], [6, 1, 3])
    assert batch.host.bounds == batch.cu_seqlens.tolist()
    assert batch.host.context_lens == batch.context_lens.tolist()
    assert batch.host.state_slots == batch.state_slots.tolist()


def test_to_keeps_host_rows_and_moves_every_tensor():
    batch = ForwardBatch.from_rows(ROWS, 16)
    moved = batch.to("cpu", non_blocking=True)
    assert moved.host is batch.host
    for name in ("input_ids", "positions", "cu_seqlens", "context_lens", "state_slots", "block_tables",
                 "logits_rows"):
        assert torch.equal(getattr(moved, name), getattr(batch, name)), name
    assert moved.logits_rows.tolist() == [0, 2]


def test_host_rows_read_from_the_tensors_when_not_given():
    built = ForwardBatch.from_rows(ROWS, 16)
    bare = ForwardBatch(built.input_ids, built.positions, built.cu_seqlens, built.context_lens, built.state_slots,
                        built.block_tables, built.logits_rows)
    assert bare.host is None
    assert bare.host_rows() == built.host
