"""The paged decode kernel's split choice (kernels/attention/ops.num_splits), CPU-side: enough blocks for the SMs at
small batches and long contexts, no splits where the rows and kv heads already fill the GPU or the keys are few."""
from kernels.attention import ops


def test_one_row_long_context_spreads_over_the_sms():
    assert ops.num_splits(1, 4, 32768, 132) == ops.MAX_SPLITS
    assert ops.num_splits(1, 4, 4096, 132) == 4096 // ops.MIN_SPLIT_KEYS


def test_short_contexts_and_wide_batches_stay_whole():
    assert ops.num_splits(1, 4, ops.MIN_SPLIT_KEYS, 132) == 1
    assert ops.num_splits(64, 4, 32768, 132) == 2  # 256 (row, kv head) blocks: two per SM need 2 splits
    assert ops.num_splits(128, 4, 32768, 132) == 1


def test_splits_never_leave_a_split_under_the_minimum_share():
    for rows in (1, 2, 8, 33):
        for keys in (1, 100, 257, 5000, 100000):
            s = ops.num_splits(rows, 4, keys, 132)
            assert 1 <= s <= ops.MAX_SPLITS and (s == 1 or keys / s >= ops.MIN_SPLIT_KEYS / 2), (rows, keys, s)


def test_kernel_preferred_from_eight_decode_rows_or_fewer_rows_at_short_context(monkeypatch):
    monkeypatch.setattr(ops, "MMA_ENABLED", False)  # SPARKINFER_DECODE_MMA=0: the CUDA-core kernels only
    assert not ops.preferred(1) and not ops.preferred(ops.MIN_ROWS - 1)  # no key bound given
    assert ops.preferred(ops.MIN_ROWS) and ops.preferred(64)
    # device run 8 (2026-11-30): the few-row kernel wins up to 1024 keys, torch from 4096
    assert ops.preferred(1, 256, 1024) and ops.preferred(7, 128, 513)
    assert not ops.preferred(1, 256, 4096) and not ops.preferred(1, 64, 512)


def test_the_mma_kernel_serves_every_row_count_and_length_it_takes():
    # device run 2 (2026-11-30): decode_mma.cu beat torch and both CUDA-core kernels on every case measured
    for rows, keys in ((1, 0), (1, 256), (1, 1 << 15), (7, 513), (8, 4096), (64, 1 << 15)):
        for head_dim in ops.MMA_HEAD_DIMS:
            assert ops.preferred(rows, head_dim, keys) and ops.pick_kernel(rows, head_dim) == "mma"


def test_mma_splits_fill_the_sms_and_keep_a_chunk_a_warp():
    assert ops.mma_smem_bytes(256) == 4 * 3 * 2 * 16 * 256 * 2  # one 192 KB block a SM at head dim 256
    assert ops.mma_splits(1, 4, 32768, 132, 256) == 33  # 4 kv heads x 33 splits = 132 blocks
    assert ops.mma_splits(1, 4, 100, 132, 256) == 2  # at least 64 keys (one 16-key chunk a warp) a split
    assert ops.mma_splits(64, 4, 4096, 132, 256) == 1  # 256 blocks already fill the SMs twice
    assert ops.mma_splits(1, 2, 1 << 20, 132, 128) == ops.MMA_MAX_SPLITS  # 2 blocks a SM want 132 splits
    assert ops.mma_splits(2, 4, 32768, 132, 64) == 64  # 24 KB a block, 4 a SM (registers): 66 wanted, 64 kept


def test_two_keys_a_lane_while_the_grid_fits_three_blocks_per_sm():
    assert ops.pick_keys_per_lane(288, 132) == 2  # 8 rows x 4 kv heads x 9 splits
    assert ops.pick_keys_per_lane(ops.KPL2_BLOCKS_PER_SM * 132, 132) == 2
    assert ops.pick_keys_per_lane(512, 132) == 1  # 64 rows x 4 kv heads x 2 splits


def test_one_key_a_lane_when_a_split_has_at_most_one_tile_per_warp():
    # device run 3 (2026-11-30): Nd = 8 at context 512 splits 5 ways (103 keys each): KPL 1 30.0 us, KPL 2 42.0
    splits = ops.num_splits(8, 4, 513, 132)
    assert splits == 5
    assert ops.pick_keys_per_lane(8 * 4 * splits, 132, -(-513 // splits)) == 1
    assert ops.pick_keys_per_lane(8 * 4 * splits, 132, 171) == 2


def test_few_row_kernel_splits_one_tile_each_within_four_blocks_per_sm():
    assert ops.tile_splits(1, 4, 513, 132) == 17  # ceil(513 / 32) tiles, 68 blocks
    assert ops.tile_splits(1, 4, 32768, 132) == 132  # 4 blocks per SM: 528 blocks
    assert ops.tile_splits(7, 4, 20, 132) == 1
    assert ops.uses_tile_kernel(1, 256) and not ops.uses_tile_kernel(ops.MIN_ROWS, 256)
