"""gemv_bt.py's work split and dispatch rule on CPU (no GPU needed): tiles per block and the imbalance that decides
where ops.gemv sends M = 1 to v12, the kernel's limits (pairs per block, tiles per block), and that nothing on CPU
is sent to it."""
import math

import pytest
import torch

from kernels.nvfp4 import gemv_bt


def _p(n: int, k: int) -> dict:
    np_, kc = -(-n // 128) * 128, -(-k // 64)
    return {"N": n, "K": k, "Np": np_, "Kc": kc}


# 27B shapes on an H200 (132 SMs): T tiles over min(T, 132) blocks, the busiest block's tiles over the mean
@pytest.mark.parametrize("n,k,tiles", [(6144, 5120, 384), (5120, 6144, 320), (17408, 5120, 1088),
                                       (248320, 5120, 15520), (2100, 5120, 136), (1000, 5120, 64)])
def test_imbalance_is_the_busiest_block_over_the_mean(n, k, tiles):
    p = _p(n, k)
    g = min(tiles, 132)
    assert p["Np"] // 16 == tiles and gemv_bt.blocks(p, 132) == g
    assert gemv_bt.imbalance(p, 132) == pytest.approx(math.ceil(tiles / g) / (tiles / g))


def test_dispatch_bounds():
    assert gemv_bt.imbalance(_p(6144, 5120), 132) <= gemv_bt.MAX_IMBALANCE  # 3 vs 2.91
    assert gemv_bt.imbalance(_p(5120, 17408), 132) <= gemv_bt.MAX_IMBALANCE  # 3 vs 2.42 (measured: a tie)
    assert gemv_bt.imbalance(_p(2100, 5120), 132) > gemv_bt.MAX_IMBALANCE  # 2 vs 1.03
    assert gemv_bt.dispatch_unroll(_p(6144, 5120)) == 2 and gemv_bt.dispatch_unroll(_p(17408, 5120)) == 3


def test_applies_needs_a_pair_per_warp_and_room_for_the_sums():
    x = torch.zeros(1, 5120, dtype=torch.bfloat16)
    assert gemv_bt.applies(x, _p(6144, 5120), 132)
    assert not gemv_bt.applies(torch.zeros(2, 5120, dtype=torch.bfloat16), _p(6144, 5120), 132)  # M = 2
    assert not gemv_bt.applies(torch.zeros(1, 256, dtype=torch.bfloat16), _p(4096, 256), 132)  # 2 pairs a block
    assert not gemv_bt.applies(x, _p(128 * 16 * 133, 5120), 132)  # 129 tiles on some block: over MAX_TILES
    assert not gemv_bt.serves(x, _p(6144, 5120))  # CPU tensors never go to the kernel


def test_rows_kernel_limits_and_choice():
    from kernels.nvfp4 import gemv_btm

    x = lambda m, k=5120: torch.zeros(m, k, dtype=torch.bfloat16)  # noqa: E731
    assert gemv_btm.applies(x(16), _p(34816, 5120), 132)  # 160 KB of x staged, 16-17 tiles a block
    assert not gemv_btm.applies(x(1), _p(34816, 5120), 132)  # one row: gemv_bt
    assert not gemv_btm.applies(x(16, 17408), _p(5120, 17408), 132)  # 557 KB of x
    assert gemv_btm.applies(x(4, 17408), _p(5120, 17408), 132)  # 139 KB
    assert not gemv_btm.applies(x(2), _p(248320, 5120), 132)  # 118 tiles a block: past MAX_TILES
    assert not gemv_btm.serves(x(4), _p(34816, 5120))  # CPU tensors never go to the kernel


def test_v13_limits_and_shape_rule():
    from kernels.nvfp4 import gemv_sk

    x = lambda m, k=5120: torch.zeros(m, k, dtype=torch.bfloat16)  # noqa: E731
    assert gemv_sk.applies(x(16), _p(34816, 5120), 132)  # 164 KB of x staged (174,080 fragments)
    assert gemv_sk.kernel_name(16, _p(34816, 5120), 132) == "nvfp4_gemv_sk_nt2"
    assert gemv_sk.x_bytes(16, _p(6144, 5120), 132) == 0  # 30,720 fragments: x read through L1
    # 9-16 rows on block-owned tiles up to 9 tiles a block at K <= 6144, whatever the imbalance (session 25)
    own = "nvfp4_gemv_sk_own_nt2_xg"
    assert [gemv_sk.kernel_name(m, _p(n, k), 132) for m, n, k in ((16, 17408, 5120), (9, 16384, 5120),
                                                                  (12, 5120, 6144))] == [own] * 3
    assert gemv_sk.kernel_name(16, _p(5120, 17408), 132) == "nvfp4_gemv_sk_nt2_xg"  # K = 17408 of x through L1
    assert gemv_sk.x_bytes(16, _p(17408, 5120), 132) == 0
    assert gemv_sk.x_bytes(16, _p(34816, 5120), 132) == 16 * (80 * 128 + 16)
    assert not gemv_sk.applies(x(1), _p(34816, 5120), 132)  # one row: gemv_bt
    assert not gemv_sk.applies(x(25), _p(34816, 5120), 132)
    assert gemv_sk.applies(x(16, 17408), _p(5120, 17408), 132)  # through L1: no staging
    assert not gemv_sk.applies(x(8, 17408), _p(5120, 17408), 132)  # 8 staged rows: 278 KB
    assert gemv_sk.applies(x(4, 17408), _p(5120, 17408), 132)  # 139 KB
    assert gemv_sk.applies(x(4), _p(256, 256), 132)  # 16 tiles x 4 chunks: most warps have none (they stop)
    assert not gemv_sk.applies(x(4, 1004), _p(256, 1004), 132)  # K % 8 != 0
    # 9-16 rows always; 17-24 rows where own_xg, else but on the LM head and, from 21 rows, where 128-row tiles fill
    # 95-100% of the SMs (16384x8192; 16384x5120 is own_xg's since session 25)
    assert all(gemv_sk.chosen(m, _p(n, 5120), 132) for m in (9, 16) for n in (6144, 16384, 248320))
    assert all(gemv_sk.chosen(20, _p(n, k), 132) for n, k in ((14336, 5120), (17408, 5120), (5120, 17408)))
    assert gemv_sk.chosen(20, _p(16384, 8192), 132) and not gemv_sk.chosen(21, _p(16384, 8192), 132)
    assert gemv_sk.kernel_name(24, _p(16384, 5120), 132) == "nvfp4_gemv_sk_own_nt3_xg"
    assert gemv_sk.chosen(24, _p(16384, 5120), 132) and gemv_sk.x_bytes(24, _p(16384, 5120), 132) == 48 << 10
    assert gemv_sk.kernel_name(24, _p(5120, 17408), 132) == "nvfp4_gemv_sk_nt3_xg"  # K = 17408: stream-K
    assert not gemv_sk.chosen(17, _p(248320, 5120), 132)
    # 2-8 rows where tiles spread evenly, at most 16 a block: not 34816x5120 (16.5), the LM head at 2-3 rows; N = 5120
    # (1.24) only through own_xg (x through L1), not at K = 17408
    assert all(gemv_sk.chosen(2, _p(n, 5120), 132) for n in (6144, 10240, 12288, 14336, 16384, 17408))
    assert not any(gemv_sk.chosen(8, _p(n, k), 132) for n, k in ((34816, 5120), (5120, 17408)))
    assert gemv_sk.chosen(8, _p(5120, 6144), 132)
    # 4-8 rows of the LM head (1.24M fragments) on the stream-K entry with x staged, 16-byte pads; not 34816x5120
    lm_head = _p(248320, 5120)
    assert [gemv_sk.kernel_name(m, lm_head, 132) for m in (2, 3, 4, 8)] == ["nvfp4_gemv_sk_own_nt1"] * 2 + [
        "nvfp4_gemv_sk_nt2"] * 2
    assert gemv_sk.chosen(4, lm_head, 132) and not gemv_sk.chosen(3, lm_head, 132)
    assert gemv_sk.x_bytes(8, lm_head, 132) == 8 * (80 * 128 + 16)
    assert gemv_sk.kernel_name(8, _p(34816, 5120), 132) == "nvfp4_gemv_sk_own_nt1"
    assert not gemv_sk.serves(x(4), _p(17408, 5120))  # CPU tensors never go to the kernel


# v13's block-owned tiles with x read through L1 (gemv_sk.own_xg, session 22 runs 2-3; session 25 runs 3, 5 and 8: 9-16
# rows up to 9 tiles a block whatever the imbalance, 17-24 rows up to 17, 25-32 up to 9 but where the GEMM's 128-row
# tiles fill 80-100% of the SMs: 14336x5120 0.85, 16384x5120 0.97): by the most tiles a block and K
@pytest.mark.parametrize("n,k,rows", [(6144, 5120, range(2, 33)), (5120, 6144, range(2, 33)),  # 3 a block (1.24)
                                      (10240, 5120, range(4, 33)), (12288, 5120, range(4, 33)),  # 5, 6 a block
                                      (14336, 5120, range(8, 25)), (16384, 5120, range(8, 25)),  # 7, 8 a block
                                      (17408, 5120, range(8, 33)),  # 9 a block (1.03 of a GEMM wave)
                                      (34816, 5120, range(17, 25)),  # 17 a block
                                      (5120, 17408, ()), (2048, 5120, ()), (248320, 5120, ())])
def test_owned_tiles_through_l1_by_tiles_a_block(n, k, rows):
    from kernels.nvfp4 import gemv_sk

    got = tuple(m for m in range(1, 34) if gemv_sk.own_xg(m, _p(n, k), 132))
    assert got == tuple(rows), (n, k, got)
    for m in got:  # x read where it is: nothing staged (17-32 rows: the partial slots), every such row count chosen
        slots = 0 if m <= 16 else (48 << 10 if m <= 24 else 64 << 10)
        assert gemv_sk.x_bytes(m, _p(n, k), 132) == slots and gemv_sk.chosen(m, _p(n, k), 132)
    x = lambda m: torch.zeros(m, k, dtype=torch.bfloat16)  # noqa: E731
    assert [gemv_sk.applies(x(m), _p(n, k), 132) for m in (25, 32, 33)] == [25 in got, 32 in got, False]


def test_staging_transforms_are_refused_on_the_cpu_and_one_at_a_time():
    """The folded-step entry points answer None off the GPU (the caller runs the separate steps), and gemv_bt takes
    at most one staging transform."""
    from kernels.nvfp4 import checkpoint, naive

    weight = checkpoint.from_tensors(naive.quantize(torch.randn(256, 128), "modelopt"))
    row = lambda: torch.randn(1, 128).to(torch.bfloat16)  # noqa: E731
    w = torch.zeros(128, dtype=torch.bfloat16)
    assert gemv_bt.silu_mul_linear(row(), row(), weight) is None
    assert gemv_bt.rms_norm_linear(row(), row(), w, 1e-6, weight) is None
    assert gemv_bt.gated_norm_linear(row(), row(), w, 1e-6, weight) is None
    with pytest.raises(ValueError, match="at most one"):
        gemv_bt.gemv_bt(row(), _p(256, 128), row(), x_up=row(), gated=(row(), w, 1e-6))


# v14 (gemv_btt): where ops.gemv sends M = 1 on a 132-SM H200 (gemv_btt.choice's table), and what its ring needs
@pytest.mark.parametrize("n,k,want", [(6144, 5120, (8, 8, 16)), (5120, 6144, (8, 8, 16)), (14336, 5120, (8, 8, 16)),
                                      (16384, 5120, (16, 4, 24)), (17408, 5120, (16, 4, 24)),
                                      (34816, 5120, (16, 4, 24)), (5120, 17408, (16, 4, 16)),
                                      (248320, 5120, (16, 4, 24)), (4096, 5184, None)])
def test_tma_choice_by_tiles_a_block_and_k(n, k, want, monkeypatch):
    from kernels.nvfp4 import gemv_btt

    assert gemv_btt.choice(_p(n, k), 132) == want
    monkeypatch.setattr(gemv_btt, "TMA", False)
    assert gemv_btt.choice(_p(n, k), 132) is None


def test_tma_ring_fits_beside_x():
    from kernels.nvfp4 import gemv_btt

    p = _p(6144, 5120)  # x 10,272 B: 22 stages of 8 pairs (9,216 B) in the 222,208 B the kernel may take
    assert gemv_btt.ring_stages(p, (8, 8, 16)) == (gemv_btt.SMEM_LIMIT - 10272) // 9216 == 22
    assert gemv_btt.ring_stages(p, (16, 4, 16)) == 11
    assert not gemv_btt.fits(_p(6144, 5184), (8, 8, 16))  # Kc = 81 is odd
    assert not gemv_btt.fits(_p(6144, 1536), (8, 8, 16))  # Kp = 12: an item of 8 pairs would cross a tile
    assert gemv_btt.fits(_p(6144, 1536), (16, 4, 16))  # items of 4 pairs do not
    assert not gemv_btt.fits(_p(512, 100_352), (16, 4, 16))  # x takes 200 KB: one stage left


def test_tma_stages_ahead_of_x(monkeypatch):
    # v14 issues ~AHEAD_BYTES of each block's slice before x is staged: 55 KB = 6 stages of 8 pairs, 3 of 16, at least 1
    from kernels.nvfp4 import gemv_btt

    assert gemv_btt.AHEAD_BYTES == 55 * 1024
    assert [gemv_btt.stages_ahead(c) for c in ((8, 8, 16), (16, 4, 16), (16, 4, 24))] == [6, 3, 3]
    monkeypatch.setattr(gemv_btt, "AHEAD_BYTES", 0)
    assert gemv_btt.stages_ahead((8, 8, 16)) == 1


def _sk_entries() -> dict:
    """gemv_sk.cu's entries: name -> the NT (n8 tiles of x rows) of the body it runs, read from the source."""
    import os
    import re

    from kernels.nvfp4 import ops

    with open(os.path.join(ops.HERE, "gemv_sk.cu")) as f:
        source = f.read()
    found = re.findall(r'extern "C" __global__ void __launch_bounds__\(SK_THREADS, 1\) (\w+)\(SK_PARAMS\) \{\s*'
                       r'(?:own|sk)_body<(\d+)', source)
    return {name: int(nt) for name, nt in found}


@pytest.mark.parametrize("sms", [78, 114, 132, 144])
def test_v13_never_sends_an_entry_more_rows_than_its_tiles_hold(sms):
    """Every M that gemv_sk.applies takes goes to an entry of gemv_sk.cu whose NT n8 tiles hold M rows (the stream-K
    entries hold at most STREAM_MAX_M = 24, so 25-32 rows only on own_nt4_xg, where own_xg), on a spread of weight
    shapes and SM counts; an entry whose partial slots live in dynamic shared memory (NT > 2) reads x through L1 and
    gets their 2 a warp x 32 lanes x NT x 16 bytes."""
    from kernels.nvfp4 import gemv_sk

    entries = _sk_entries()
    assert len(entries) == 8 and entries["nvfp4_gemv_sk_own_nt4_xg"] == 4
    shapes = [(n, 5120) for n in (1000, 2048, 5120, 6144, 10240, 12288, 14336, 16384, 17408, 34816, 248320)] + [
        (5120, 6144), (5120, 17408), (256, 256), (16384, 8192), (6100, 5136), (4096, 1024), (40960, 4096)]
    served = set()
    for n, k in shapes:
        for m in range(1, 41):
            if not gemv_sk.applies(torch.zeros(m, k, dtype=torch.bfloat16), _p(n, k), sms):
                continue
            name = gemv_sk.kernel_name(m, _p(n, k), sms)
            nt = entries[name]
            assert m <= 8 * nt and (m <= gemv_sk.STREAM_MAX_M or name == "nvfp4_gemv_sk_own_nt4_xg"), (n, k, m, name)
            if nt > 2:
                assert "_own_" not in name or (name.endswith("_xg") and gemv_sk.x_bytes(m, _p(n, k), sms)
                                               == 2 * gemv_sk.WARPS * 32 * nt * 16), (n, k, m, name)
            served.add(m)
    assert served == set(range(2, 33)), sorted(served)
