"""NVFP4 wgmma GEMM (gemm_wgmma.cu) against dequantize-then-f32-matmul on fresh random inputs (needs an sm_90 GPU)."""
import pytest
import torch

from kernels.nvfp4 import checkpoint, gemm_wgmma, naive, ops, wgmma_pick

pytestmark = pytest.mark.gpu
REL_TOL = 1e-2
# [N x K]: N not a multiple of the 128-row tile, K not a multiple of 64 (and of 16 * 64), short and long K
SHAPES = [(200, 80), (1000, 1040), (640, 1088), (1392, 5120), (384, 17408), (5120, 6144)]
M_VALUES = [33, 100, 257, 1000]


def _weight(n: int, k: int, fmt: str = "modelopt") -> checkpoint.NVFP4Weight:
    w = torch.randn(n, k, device="cuda") * (0.5 + torch.rand(n, 1, device="cuda"))  # rows of varied magnitude
    return checkpoint.from_tensors(naive.quantize(w, fmt))


def _run(x: torch.Tensor, p: dict, **kw) -> torch.Tensor:
    out = torch.full((x.shape[0], p["N"]), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm_wgmma.gemm_wgmma(x, p, out, **kw)
    torch.cuda.synchronize()
    return out


def _err(out: torch.Tensor, ref: torch.Tensor) -> float:
    assert not torch.isnan(out).any(), "unwritten or NaN outputs"
    return ((out.float() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("n,k", SHAPES, ids=lambda v: str(v))
def test_matches_dequantized_matmul(n, k):
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(torch.float32), ops.prepared(weight)
    for m in M_VALUES:
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        ref = x.float() @ ref_w.t()
        assert _err(_run(x, p), ref) < REL_TOL, (n, k, m)


# kernel families: x pre-permuted (default), the same without the proxy fence, x copied as is in 4-byte pieces
VARIANTS = {"permuted": {"permute": True}, "nofence": {"permute": True, "fence": False}, "x4": {"permute": False}}
# T = 64 with session 2's 6-stage ring (bench A/B against the 8-stage default), whole tiles and split-K
RING6 = {"s6": {"diag": "_s6", "splits": 1}, "s6_split3": {"diag": "_s6", "splits": 3}}


@pytest.mark.parametrize("tile,variant", [(t, v) for t in sorted(gemm_wgmma.TILES) for v in sorted(VARIANTS)]
                         + [(64, v) for v in sorted(RING6)],
                         ids=lambda v: f"T{v}" if isinstance(v, int) else v)
def test_every_kernel(tile, variant):
    # each kernel on odd M (partial token tiles), odd K chunk counts (the loop's odd tail), K % 64 != 0 and
    # N % 128 != 0
    for n, k in [(1000, 1040), (272, 5120 + 64)]:
        weight = _weight(n, k)
        ref_w, p = weight.dequantize(torch.float32), ops.prepared(weight)
        for m in (5, 24, 33, tile + 1, 3 * tile - 5):
            x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            err = _err(_run(x, p, tile=tile, **{**VARIANTS, **RING6}[variant]), x.float() @ ref_w.t())
            assert err < REL_TOL, (n, k, m, err)


def test_large_layer_shape_every_tile():
    weight = _weight(10240, 5120)
    ref_w, p = weight.dequantize(torch.float32), ops.prepared(weight)
    x = torch.randn(2048 + 77, 5120, device="cuda").to(torch.bfloat16)
    ref = x.float() @ ref_w.t()
    for tile in sorted(gemm_wgmma.TILES):
        for variant, kw in VARIANTS.items():
            assert _err(_run(x, p, tile=tile, **kw), ref) < REL_TOL, (tile, variant)


def test_fused_shards_with_different_global_scales():
    shards = [_weight(n, 1024) for n in (1024, 256, 112)]
    for w, s in zip(shards, (1.0, 1000.0, 1e-3)):
        w.gmul = w.gmul * s
    fused = checkpoint.concat_rows(shards)
    ref_w, p = fused.dequantize(), ops.prepared(fused)
    for m in (40, 257):
        x = torch.randn(m, 1024, device="cuda").to(torch.bfloat16)
        y, ref = _run(x, p).float(), x.float() @ ref_w.t()
        for a, b in [(0, 1024), (1024, 1280), (1280, 1392)]:  # each shard on its own scale
            assert ((y[:, a:b] - ref[:, a:b]).norm() / ref[:, a:b].norm()).item() < REL_TOL, (m, a)


def test_extreme_scales():
    # largest e4m3 scale (448) and subnormal ones (2^-9) in the same weight, every code
    n, k = 256, 512
    packed = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device="cuda")
    scale = torch.tensor([448.0, 2.0 ** -9, 1.0, 0.013671875], device="cuda").repeat(n, k // 64)
    weight = checkpoint.NVFP4Weight(packed, scale.to(torch.float8_e4m3fn), torch.tensor(0.01, device="cuda"))
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    x = torch.randn(100, k, device="cuda").to(torch.bfloat16)
    assert _err(_run(x, p), x.float() @ ref_w.t()) < REL_TOL


def test_unaligned_output_rows_and_repeated_calls():
    # N % 8 != 0: scalar stores; the same output buffer rewritten by a second call with other inputs
    weight = _weight(1001, 320)
    ref_w, p = weight.dequantize(), ops.prepared(weight)
    out = torch.full((70, 1001), float("nan"), dtype=torch.bfloat16, device="cuda")
    for _ in range(2):
        x = torch.randn(70, 320, device="cuda").to(torch.bfloat16)
        gemm_wgmma.gemm_wgmma(x, p, out)
        assert _err(out, x.float() @ ref_w.t()) < REL_TOL


def test_rejects_what_it_cannot_run():
    weight = _weight(256, 512)
    p = ops.prepared(weight)
    out = torch.empty(40, 256, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ValueError):
        gemm_wgmma.gemm_wgmma(torch.randn(40, 256, device="cuda").to(torch.bfloat16), p, out)  # K mismatch
    with pytest.raises(ValueError):
        gemm_wgmma.gemm_wgmma(torch.randn(40, 512, device="cuda"), p, out)  # f32 x
    with pytest.raises(ValueError):
        gemm_wgmma.gemm_wgmma(torch.randn(40, 513, device="cuda").to(torch.bfloat16)[:, 1:], p, out)  # strided
    with pytest.raises(ValueError):
        gemm_wgmma.gemm_wgmma(torch.randn(40, 512, device="cuda").to(torch.bfloat16), p, out[:39])  # out shape
    with pytest.raises(ValueError):
        gemm_wgmma.gemm_wgmma(torch.randn(40, 512, device="cuda").to(torch.bfloat16), p, out, tile=96)
    with pytest.raises(ValueError):
        gemm_wgmma.gemm_wgmma(torch.randn(40, 512, device="cuda").to(torch.bfloat16), p, out, fence=False,
                              permute=False)


def test_pick_tile_prefers_full_waves():
    # CPU-side logic, runs wherever the GPU tests run: the fastest tiles of run 2
    assert gemm_wgmma.pick_tile(8192, 10240, 132) == 256 and gemm_wgmma.pick_tile(2048, 5120, 132) == 256
    assert gemm_wgmma.pick_tile(128, 6144, 132) == 64 and gemm_wgmma.pick_tile(128, 10240, 132) == 128
    assert all(gemm_wgmma.pick_tile(m, 1024) in gemm_wgmma.TILES for m in (33, 100, 257, 1000))


# split-K (the _sk kernels): the 5120-row layer shapes, whose grids are small below M = 1024, and an odd shape
# (N % 128 != 0, K % 64 != 0: Kc = 82, so the splits' chunk ranges are uneven)
SPLIT_SHAPES = [(5120, 17408), (5120, 6144), (1000, 5200)]
SPLIT_M = [33, 64, 100, 128, 512]


@pytest.mark.parametrize("n,k", SPLIT_SHAPES, ids=lambda v: str(v))
def test_split_k_matches_dequantized_matmul(n, k):
    weight = _weight(n, k)
    ref_w, p = weight.dequantize(torch.float32), ops.prepared(weight)
    for m in SPLIT_M:
        for splits in (2, 3, 4, 0):  # 0: the launcher's (tile, S)
            x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            err = _err(_run(x, p, splits=splits), x.float() @ ref_w.t())
            assert err < REL_TOL, (n, k, m, splits, err)


@pytest.mark.parametrize("tile", sorted(gemm_wgmma.TILES), ids=lambda t: f"T{t}")
def test_split_k_every_tile(tile):
    # every _sk kernel, partial token tiles and 3 splits of an odd chunk count (5120 + 64: Kc = 81)
    weight = _weight(272, 5120 + 64)
    ref_w, p = weight.dequantize(torch.float32), ops.prepared(weight)
    for m in (5, 24, 33, tile + 1, 3 * tile - 5):
        for splits in (3, 81):  # 81: one chunk per block
            x = torch.randn(m, 5184, device="cuda").to(torch.bfloat16)
            err = _err(_run(x, p, tile=tile, splits=splits), x.float() @ ref_w.t())
            assert err < REL_TOL, (tile, m, splits, err)


def test_split_k_workspace_stays_clean():
    # the workspace and counters are shared by every call on the device: alternating shapes, tiles, M and S, each
    # call (the second round too) must be as correct as the first
    weights = [_weight(n, k) for n, k in [(5120, 6144), (1000, 5200)]]
    refs = [(w.dequantize(torch.float32), ops.prepared(w)) for w in weights]
    plan = [(0, 128, 0, 0), (1, 100, 64, 3), (0, 64, 64, 4), (1, 33, 0, 0), (0, 512, 256, 2), (1, 512, 128, 5),
            (0, 100, 128, 3)]
    for round_ in range(2):
        for i, m, tile, splits in plan:
            ref_w, p = refs[i]
            x = torch.randn(m, p["K"], device="cuda").to(torch.bfloat16)
            err = _err(_run(x, p, tile=tile, splits=splits), x.float() @ ref_w.t())
            assert err < REL_TOL, (round_, i, m, tile, splits, err)
    for (kind, _), bufs in gemm_wgmma._SCRATCH.items():
        if kind in ("split_k", "counters"):  # the stream-K partial sums are overwritten, never re-zeroed
            assert not bufs[-1].any(), "split-K workspace or counters left non-zero"


def test_split_k_cuda_graph_replays():
    # two split GEMMs (forced S = 4 and the launcher's choice) captured in one graph after a warm-up, replayed with
    # new x: the captured workspace pointers stay valid and clean
    w1, w2 = _weight(5120, 6144), _weight(1000, 5200)
    (r1, p1), (r2, p2) = [(w.dequantize(torch.float32), ops.prepared(w)) for w in (w1, w2)]
    x1 = torch.randn(64, 6144, device="cuda").to(torch.bfloat16)
    x2 = torch.randn(100, 5200, device="cuda").to(torch.bfloat16)
    y1 = torch.empty(64, 5120, dtype=torch.bfloat16, device="cuda")
    y2 = torch.empty(100, 1000, dtype=torch.bfloat16, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on the capture stream: compiles, grows the workspace
        gemm_wgmma.gemm_wgmma(x1, p1, y1, splits=4)
        gemm_wgmma.gemm_wgmma(x2, p2, y2)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemm_wgmma.gemm_wgmma(x1, p1, y1, splits=4)
        gemm_wgmma.gemm_wgmma(x2, p2, y2)
    for _ in range(3):
        x1.copy_(torch.randn_like(x1, dtype=torch.float32))
        x2.copy_(torch.randn_like(x2, dtype=torch.float32))
        y1.fill_(float("nan"))
        y2.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert _err(y1, x1.float() @ r1.t()) < REL_TOL
        assert _err(y2, x2.float() @ r2.t()) < REL_TOL


def test_split_k_rejects_what_it_cannot_run():
    p = ops.prepared(_weight(256, 512))  # Kc = 8
    x = torch.randn(40, 512, device="cuda").to(torch.bfloat16)
    out = torch.empty(40, 256, dtype=torch.bfloat16, device="cuda")
    for kw in ({"splits": 9}, {"splits": -1}, {"splits": 2, "permute": False}, {"splits": 2, "fence": False}):
        with pytest.raises(ValueError):
            gemm_wgmma.gemm_wgmma(x, p, out, **kw)


def test_pick_splits_only_small_grids():
    # CPU-side logic: S = 1 where the S = 1 grid fills 2 waves or more (and for the LM head), S <= Kc / 8 otherwise
    for n, k in [(5120, 17408), (5120, 6144), (17408, 5120), (10240, 5120), (248320, 5120)]:
        np_, kc = -(-n // 128) * 128, -(-k // 64)
        for m in (33, 64, 128, 512, 2048, 8192):
            tile, splits = gemm_wgmma.pick(m, np_, kc, 132)
            assert tile in gemm_wgmma.TILES and 1 <= splits <= max(1, kc // gemm_wgmma.MIN_SPLIT_CHUNKS)
            grid = (np_ // 128) * -(-m // tile)
            waves = wgmma_pick.TILE_SPLIT_WAVES.get(tile, wgmma_pick.SPLIT_WAVES)
            assert splits == 1 or grid < waves * 132 * gemm_wgmma.TILES[tile][1], (n, k, m, tile, splits)
        assert gemm_wgmma.pick(8192, np_, kc, 132) == (gemm_wgmma.pick_tile(8192, np_, 132), 1)
    # the split-K sweep of 2026-11-29: the fastest (T, S) where it was clear, S = 1 where splits measured slower
    assert gemm_wgmma.pick(64, 5120, 272) == (64, 6) and gemm_wgmma.pick(128, 5120, 272) == (128, 3)
    assert gemm_wgmma.pick(512, 5120, 272) == (256, 3) and gemm_wgmma.pick(64, 5120, 96) == (64, 6)
    assert gemm_wgmma.pick(512, 5120, 96)[1] == 1 and gemm_wgmma.pick(512, 12288, 80)[1] == 1
    assert gemm_wgmma.pick(128, 10240, 80)[1] == 1 and gemm_wgmma.pick(100, 10240, 80)[1] == 1
    # session 10 run 1 (M = 33-64 on T = 64): gate + up splits 3 ways (77-82 us against 94 at S = 1), the 16384-row
    # projection does not (40.4 at S = 1 against 41.6 at S = 2 for M = 64)
    assert gemm_wgmma.pick(40, 34816, 80) == (64, 3) and gemm_wgmma.pick(64, 34816, 80) == (64, 3)
    assert gemm_wgmma.pick(64, 16384, 80) == (64, 1)
