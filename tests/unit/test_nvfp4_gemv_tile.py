"""gemv_tile.cu (v5 GEMV) control flow mirrored on CPU: the blocks' tile split, the warps' chunk split and the per-warp
cp.async ring (issue cursor, stage slots, wait_group counts) must hand every (tile, chunk) to exactly one warp, in
order, from the stage it was copied into; plus the host's shared-memory sizing and dispatch rules (ops.py)."""
import pytest
import torch

from kernels.nvfp4 import gemv_tile, ops

WARPS = 8


def _warp_items(t0: int, nt: int, w: int, kc: int, depth: int) -> list:
    """gemv_tile_body for one warp -> [(tile, chunk)] in the order computed; asserts the ring's invariants."""
    ca, nw = w * kc // WARPS, (w + 1) * kc // WARPS - (w * kc // WARPS)
    total, it, ic, issued = nt * nw, 0, 0, 0
    stage, groups = {}, [("x",)]  # stage slot -> item copied there; committed cp.async groups, oldest first
    for s in range(depth):  # prologue
        if issued < total:
            stage[s] = (t0 + it, ca + ic)
            issued, ic = issued + 1, ic + 1
            if ic == nw:
                ic, it = 0, it + 1
        groups.append(stage.get(s) if s < total else None)
    assert len(groups) - 1 - depth == 0  # wait_group<D> leaves exactly the x group complete
    done, slot = [], 0
    for j in range(nt):
        for c in range(nw):
            # wait_group<D-1>: at most D-1 newer groups than the one holding this item
            q = len(done)
            assert groups[1 + q] == (t0 + j, ca + c) and len(groups) - 1 - (1 + q) == depth - 1
            assert stage[slot] == (t0 + j, ca + c)
            done.append(stage.pop(slot))
            item = None
            if issued < total:
                item = stage[slot] = (t0 + it, ca + ic)
                issued, ic = issued + 1, ic + 1
                if ic == nw:
                    ic, it = 0, it + 1
            groups.append(item)
            slot = (slot + 1) % depth
    return done


@pytest.mark.parametrize("ntiles,kc,grid", [(8, 2, 8), (568, 5, 528), (384, 80, 384), (1088, 80, 528),
                                            (15520, 80, 528), (320, 272, 320), (40, 13, 7)])
@pytest.mark.parametrize("depth", [6, 10])
def test_every_chunk_once_in_order(ntiles, kc, grid, depth):
    seen = []
    for b in range(grid):
        t0, t1 = ntiles * b // grid, ntiles * (b + 1) // grid
        assert t1 > t0  # no block without a tile (grid <= ntiles)
        per_warp = [_warp_items(t0, t1 - t0, w, kc, depth) for w in range(WARPS)]
        for items in per_warp:  # each warp walks its tiles in order, chunks ascending within a tile
            assert items == sorted(items)
        seen += [it for items in per_warp for it in items]
    assert len(seen) == ntiles * kc and set(seen) == {(t, c) for t in range(ntiles) for c in range(kc)}


def _p(n: int, k: int) -> dict:
    return {"N": n, "K": k, "Np": -(-n // 128) * 128, "Kc": -(-k // 64)}


def test_shared_memory_sizing():
    p, p17 = _p(6144, 5120), _p(5120, 17408)
    assert gemv_tile._tile_smem(1, p, 6) == (80 * 64 + 8) * 2 + 8 * 6 * 640
    # M = 1 on K = 5120: 4 blocks of 8 warps per SM (the register cap), one wave holds all 384 tiles; K = 17408: 3
    assert gemv_tile._tile_slots(1, p, 6, 132) == 528 and gemv_tile._tile_slots(1, p17, 6, 132) == 396
    assert gemv_tile._tile_slots(1, p17, 10, 132) == 264 and gemv_tile._tile_slots(4, p, 6, 132) == 264
    # M = 16 on K = 5120 fits one block per SM with the default ring; not on K = 6144 or 17408
    assert gemv_tile.tile_fits(16, p, 8) and gemv_tile._tile_slots(16, p, 8, 132) == 132
    assert not gemv_tile.tile_fits(16, _p(5120, 6144), 8) and not gemv_tile.tile_fits(9, p17, 8)


def test_dispatch_picks_v5_only_where_it_measured_ahead():
    x = lambda m, k: torch.zeros(m, k, dtype=torch.bfloat16)  # noqa: E731
    # run 4: v5 ahead at M = 1 on 6144x5120 and 5120x6144 (one tile per block, ~17.7 MB)
    assert gemv_tile.tile_applies(x(1, 5120), _p(6144, 5120)) and gemv_tile.tile_applies(x(1, 6144), _p(5120, 6144))
    assert gemv_tile.tile_applies(x(1, 5120), _p(1024, 5120))  # a small projection
    # behind: more tiles than one wave of blocks (10240x5120: 640 > 528), weights over ~19 MB, M = 4 (2 blocks/SM)
    for m, n, k in [(1, 10240, 5120), (1, 17408, 5120), (1, 5120, 17408), (1, 248320, 5120), (4, 6144, 5120)]:
        assert not gemv_tile.tile_applies(x(m, k), _p(n, k)), (m, n, k)
    assert not gemv_tile.tile_applies(x(16, 5120), _p(6144, 5120))  # NT = 2 lost on every shape
    assert not gemv_tile.tile_applies(x(1, 5121)[:, 1:], _p(6144, 5120))  # 2 bytes off 16


def test_gemv_tile_refuses_what_it_cannot_run():
    with pytest.raises(ValueError):
        gemv_tile.gemv_tile(torch.zeros(16, 6144, dtype=torch.bfloat16), _p(5120, 6144), None)  # x too large
    with pytest.raises(ValueError):
        gemv_tile.gemv_tile(torch.zeros(2, 64, dtype=torch.bfloat16), _p(128, 64), None, depth=7)  # no such ring depth


def test_cluster_gemv_only_where_clusters_of_two_fill_a_wave():
    """ops.cluster_size: 2 where (Np/128) x 2 blocks fill 84-100% of 2 blocks per SM on 132 SMs, else 0 (gemv_v2)."""
    for n, want in ((16384, 2), (14336, 2), (12288, 0), (17408, 0), (6144, 0), (34816, 0)):
        p = {"Np": -(-n // 128) * 128, "Kc": 80}
        assert ops.cluster_size(p, 132) == want, n


def test_x_in_shared_memory_only_for_long_streams_that_fit():
    """ops.xs_applies: the LM head and the fused MLP gate+up (>= 64 chunks per block of 264) stage x; the layer
    shapes (~41 chunks per block) and x over 64 KB (M = 16 at K = 5120) do not."""
    def p(n, k):
        return {"Np": -(-n // 128) * 128, "Kc": -(-k // 64)}
    assert ops.xs_applies(1, p(248320, 5120), 264) and ops.xs_applies(4, p(248320, 5120), 264)
    assert ops.xs_applies(1, p(34816, 5120), 264)
    assert not ops.xs_applies(1, p(17408, 5120), 264) and not ops.xs_applies(1, p(5120, 17408), 264)
    assert not ops.xs_applies(16, p(248320, 5120), 264) and not ops.xs_applies(17, p(248320, 1024), 264)
