"""The wgmma GEMM launcher's CPU-side choices (kernels/nvfp4/gemm_wgmma.py): which M and grids go to the stream-K
kernel, and with how many waves of whole tiles first. The numbers are the 27B layer shapes on a 132-SM H200."""
from kernels.nvfp4 import gemm_wgmma, ops, streamk

LAYER_SHAPES = [(10240, 5120), (6144, 5120), (5120, 6144), (17408, 5120), (5120, 17408), (12288, 5120)]


def _np(n: int) -> int:
    return -(-n // 128) * 128


def _stub_gpu_calls(monkeypatch) -> None:
    """The stream-K launchers on CPU: no permute copy, no CUDA stream, a fresh scratch, no graph capture (the kernel
    launches themselves are stubbed by each test)."""
    import torch

    monkeypatch.setattr(gemm_wgmma, "permuted_x", lambda x, p, stream: x)
    monkeypatch.setattr(streamk._compile, "current_stream", lambda: None)
    monkeypatch.setattr(gemm_wgmma, "_SCRATCH", {})
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)


def test_stream_k_for_prefill_sized_m_on_every_layer_shape():
    for n, k in LAYER_SHAPES:
        for m in (256, 512, 1000, 2048):
            assert streamk.pick(m, _np(n), k, 132) in (0, 1), (n, k, m)


def test_not_stream_k_outside_the_measured_range():
    for n, k in LAYER_SHAPES:
        for m in (1, 33, 128, 255, 2049, 8192):
            assert streamk.pick(m, _np(n), k, 132) == -1, (n, k, m)


def test_lm_head_keeps_whole_tiles_once_the_grid_is_many_waves():
    # 1940 row tiles: M = 256 is 14.7 waves of T = 256 tiles (stream-K), M = 512 29.4 (the pick's whole tiles)
    assert streamk.pick(256, _np(248320), 5120, 132) == 0
    assert streamk.pick(512, _np(248320), 5120, 132) == -1
    # a GPU with fewer SMs reaches the wave limit sooner
    assert streamk.pick(256, _np(248320), 5120, 66) == -1


def test_one_wave_of_whole_tiles_first_where_x_outgrows_the_l2():
    # x = M x K bf16: 2048 x 17408 x 2 = 71 MB runs its first wave whole; 1024 x 17408 x 2 = 35.7 MB does not
    assert streamk.pick(2048, 5120, 17408, 132) == 1
    assert streamk.pick(1024, 5120, 17408, 132) == 0
    assert streamk.pick(2048, 17408, 5120, 132) == 0


def test_t128_stream_k_for_decode_batches_where_whole_tiles_leave_the_last_wave_idle():
    # session 17 device run 10 (us, M = 65 / 128, T = 128 stream-K / the whole-tile pick): 17408x5120 49.0 / 75.9,
    # 49.8 / 80.9; 34816x5120 (MLP gate+up) 84.0 / 119.1, 92.1 / 122.2; 6144x5120 25.0 / 33.2, 26.6 / 33.5;
    # 5120x6144 25.3 / 27.6, 27.4 / 30.3; 5120x17408 51.1 / 55.2, 54.1 / 58.4; 14336x5120 41.8 / 43.7, 43.7 / 43.8;
    # LM head 572.2 / 579.8, 631.2 / 648.0
    for n, k in [(17408, 5120), (34816, 5120), (6144, 5120), (10240, 5120), (12288, 5120), (5120, 6144),
                 (5120, 17408), (14336, 5120), (248320, 5120)]:
        for m in (65, 96, 128):
            assert streamk.choice(m, _np(n), k, 132) == (128, 0), (n, k, m)
    # whole tiles kept where they fill a wave: 16384x5120's 128 tiles (44.0-44.5 against 45.3-47.0)
    for m in (65, 96, 128):
        assert streamk.choice(m, _np(16384), 5120, 132) == (0, -1), m
    # outside 65-128 rows: the T = 64 tiles at 64 rows (run 3: 21.8 vs 26.6 us on 6144x5120), T = 256 from 256
    for n, k in LAYER_SHAPES:
        assert streamk.choice(64, _np(n), k, 132) == (0, -1) and streamk.choice(129, _np(n), k, 132) == (0, -1)
        assert streamk.choice(512, _np(n), k, 132) == (256, streamk.pick(512, _np(n), k, 132))


def test_the_launcher_sends_a_decode_batch_to_the_t128_stream_k_kernel(monkeypatch):
    import torch

    launched = []
    monkeypatch.setattr(streamk, "launch", lambda x, p, out, tile, waves, sms: launched.append((tile, waves)) or True)
    p = {"N": 34816, "K": 5120, "Kc": 80, "Np": 34816}
    x, out = torch.zeros(96, 5120, dtype=torch.bfloat16), torch.zeros(96, 34816, dtype=torch.bfloat16)
    assert gemm_wgmma._stream_k_ran(x, p, out, (0, 0, -1), True, 132) and launched == [(128, 0)]
    # a tile or split asked for, or a non-default kernel family, keeps the whole-tile launch
    assert not gemm_wgmma._stream_k_ran(x, p, out, (64, 0, -1), True, 132)
    assert not gemm_wgmma._stream_k_ran(x, p, out, (0, 0, -1), False, 132)
    monkeypatch.setattr(streamk, "SMALL_M_RANGE", (1, 0))  # SPARKINFER_NVFP4_SMALL_SK=0
    assert not gemm_wgmma._stream_k_ran(x, p, out, (0, 0, -1), True, 132) and len(launched) == 1


def test_t128_stream_k_runs_the_warp_specialised_kernel(monkeypatch):
    # streamk.launch on CPU with the GPU calls stubbed: T = 128 with no whole tiles first goes to gemm_ws_sk.cuh's
    # kernel (one 288-thread block a SM, x permuted into 128 token rows, the epilogue's staging after the ring);
    # SPARKINFER_NVFP4_WS_SK=0 (streamk.WS) or whole tiles first keep gemm_stream_k.cuh's 256-thread _skm kernel
    import torch

    from kernels.nvfp4 import gemm_ws

    launches = []
    record = lambda name: lambda grid, block, args, **kw: launches.append((name, grid, block, args, kw))  # noqa: E731
    monkeypatch.setattr(gemm_ws, "_function", record)
    monkeypatch.setattr(gemm_ws, "_skm_kernel", lambda: record("ws_skm"))
    monkeypatch.setattr(gemm_wgmma, "kernel", lambda name, tile: record(name))
    _stub_gpu_calls(monkeypatch)
    p = {"N": 17408, "K": 5120, "Kc": 80, "Np": 17408, "wq": torch.zeros(1), "wsc": torch.zeros(1),
         "alpha": torch.zeros(1)}
    x, out = torch.zeros(96, 5120, dtype=torch.bfloat16), torch.zeros(96, 17408, dtype=torch.bfloat16)
    assert streamk.launch(x, p, out, 128, 0, 132)
    permute, (name, grid, block, args, kw) = launches[0][0], launches[1]
    assert (permute, name, grid, block) == ("nvfp4_permute_x_sw", "ws_skm", (132,), (gemm_ws.WS_THREADS,))
    assert kw["shared_mem"] == 8 * gemm_wgmma.stage_bytes(128) + 1024 + 128 * 136 * 2 <= 227 * 1024
    assert [int(a) for a in args[5:12]] + [int(args[15])] == [96, 17408, 5120, 80, 136, gemm_wgmma.raster_group(p),
                                                               1, 128]
    # the weight's pointers (kept in p by gemm_wgmma.weight_args after the first launch)
    assert [int(args[i]) for i in (0, 1, 4)] == [p[key].data_ptr() for key in ("wq", "wsc", "alpha")]
    assert streamk.launch(x, p, out, 128, 1, 132) and launches[-1][0] == "nvfp4_gemm_wgmma_t128_skm"
    assert [int(launches[-1][3][i]) for i in (0, 1, 4)] == [p[key].data_ptr() for key in ("wq", "wsc", "alpha")]
    monkeypatch.setattr(streamk, "WS", False)
    assert streamk.launch(x, p, out, 128, 0, 132) and launches[-1][0] == "nvfp4_gemm_wgmma_t128_skm"
    assert len(launches) == 4


def test_launcher_refuses_what_no_kernel_takes_before_touching_the_gpu():
    # gemm_wgmma.check_args runs before any GPU call: CPU tensors of the right shapes pass it, wrong ones name the fault
    import pytest
    import torch

    p = {"N": 256, "K": 128, "Kc": 2, "Np": 256}
    x, out = torch.zeros(4, 128, dtype=torch.bfloat16), torch.zeros(4, 256, dtype=torch.bfloat16)
    assert gemm_wgmma.check_args(x, p, out, 0, True, True, "", 0) is True
    assert gemm_wgmma.check_args(x, p, out, 0, True, False, "", 1) is False
    cases = [((x.float(), p, out, 0, True, True, "", 0), "x must be"),
             ((x, p, out[:, :200], 0, True, True, "", 0), "out must be"),
             ((x, p, out, 96, True, True, "", 0), "tile must be"),
             ((x, p, out, 0, False, False, "", 0), "no-fence"),
             ((x, p, out, 0, True, False, "", 2), "splits must be"),
             ((x, p, out, 0, True, True, "", 3), "splits must be")]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            gemm_wgmma.check_args(*args)


def test_stream_k_launch_arguments(monkeypatch):
    # streamk.launch on CPU with the GPU calls stubbed: one block per SM, the workspace and flags from the shared
    # scratch, dp = whole waves (capped at the tiles there are), the kernel argument order of gemm_wgmma.cu's _skm
    import torch

    launches = []

    def fake_kernel(name, tile):
        return lambda grid, block, args, shared_mem, stream: launches.append((name, grid, block, args, shared_mem))

    monkeypatch.setattr(gemm_wgmma, "kernel", fake_kernel)
    _stub_gpu_calls(monkeypatch)
    p = {"N": 1001, "K": 128, "Kc": 2, "Np": 1024, "wq": torch.zeros(1), "wsc": torch.zeros(1),
         "alpha": torch.zeros(1)}
    x, out = torch.zeros(600, 128, dtype=torch.bfloat16), torch.zeros(600, 1001, dtype=torch.bfloat16)
    for waves, dp in ((0, 0), (1, 10), (5, 20)):  # 8 row tiles x 3 token tiles = 24 tiles: 2 whole waves of 10
        assert streamk.launch(x, p, out, 256, waves, 10)
        name, grid, block, args, smem = launches[-1]
        assert (name, grid, block, smem) == ("nvfp4_gemm_wgmma_t256_skm", (10,), (256,), gemm_wgmma.smem_bytes(256))
        assert [int(a) for a in args[5:12]] == [600, 1001, 128, 2, 8, gemm_wgmma.raster_group(p), 0]
        assert int(args[14]) == 1 and int(args[15]) == dp
    assert streamk.launch(x, p, out, 128, 2, 2)  # 40 tiles of T = 128 on 2 SMs: two whole waves = 4 tiles
    assert int(launches[-1][3][15]) == 4 and launches[-1][1] == (2,)
    ws = gemm_wgmma._SCRATCH[("stream_k", torch.device("cpu"))][-1]
    assert ws.numel() >= 10 * 256 * 128


def test_from_17_rows_the_wgmma_gemm_takes_over_where_it_serves():
    # device run 6 of 2026-11-30: at M = 24 / 32 the T = 32 GEMM beat the GEMV on every layer shape and the LM head,
    # at M = 16 the GEMV won on all of them
    assert ops.uses_gemv(16, wgmma=True) and not ops.uses_gemv(17, wgmma=True)
    assert ops.uses_gemv(32, wgmma=False) and not ops.uses_gemv(33, wgmma=False)


def test_the_32_token_tile_only_for_at_most_32_rows():
    for n, k in LAYER_SHAPES + [(248320, 5120)]:
        for m in (33, 48, 64, 100, 512):
            assert gemm_wgmma.pick(m, _np(n), -(-k // 64), 132)[0] != 32, (n, k, m)
            assert gemm_wgmma.pick_tile(m, _np(n), 132) != 32
    assert gemm_wgmma.pick_tile(24, _np(248320), 132) == 32  # 1940 row tiles: the small tile's ring is the cheaper


def test_a_bad_wgmma_min_m_stops_with_one_line():
    import subprocess
    import sys

    env = {**__import__("os").environ, "SPARKINFER_NVFP4_WGMMA_MIN_M": "lots"}
    done = subprocess.run([sys.executable, "-c", "import kernels.nvfp4.ops"], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == "SPARKINFER_NVFP4_WGMMA_MIN_M: 'lots' is not a whole number of rows"


def test_memoised_choices_follow_the_ranges_benches_set(monkeypatch):
    # streamk.choice and wgmma_pick.pick are memoised (host time a launch); the answer must still follow
    # M_RANGE / SMALL_M_RANGE, which bench/gpu_model.py and SPARKINFER_NVFP4_SMALL_SK change
    from kernels.nvfp4 import wgmma_pick

    np_ = _np(17408)
    assert streamk.choice(512, np_, 5120, 132) == (256, streamk.pick(512, np_, 5120, 132))
    assert streamk.choice(96, np_, 5120, 132) == (128, 0)
    monkeypatch.setattr(streamk, "M_RANGE", (1, 0))
    monkeypatch.setattr(streamk, "SMALL_M_RANGE", (1, 0))
    assert streamk.choice(512, np_, 5120, 132) == (0, -1) and streamk.choice(96, np_, 5120, 132) == (0, -1)
    for m in (17, 40, 64, 100, 512):
        assert wgmma_pick.pick(m, np_, 80, 132) == wgmma_pick.pick.__wrapped__(m, np_, 80, 132), m


def test_bulk_copied_kernel_where_session_18_measured_it_faster():
    # gemm_ws.bulk_choice: 17-64 rows on the fused GDN in_proj (16384x5120, 128 row tiles) and attention q+k+v
    # (14336x5120, 112) at one block a SM, the LM head (1940 row tiles) at two; T = 32 up to 32 rows
    from kernels.nvfp4 import gemm_ws

    assert [gemm_ws.bulk_choice(m, 16384, 80, 132) for m in (16, 17, 32, 33, 64, 65)] == [
        None, (32, 1), (32, 1), (64, 1), (64, 1), None]
    assert gemm_ws.bulk_choice(24, 14336, 80, 132) == (32, 1)
    assert gemm_ws.bulk_choice(24, _np(248320), 80, 132) == (32, 2)
    # where it lost or tied (one block a SM leaves a second wave, or too few row tiles), and Kc % 4 != 0
    for n, k in [(34816, 5120), (17408, 5120), (6144, 5120), (5120, 6144), (5120, 17408), (10240, 5120)]:
        assert gemm_ws.bulk_choice(32, _np(n), -(-k // 64), 132) is None, (n, k)
    assert gemm_ws.bulk_choice(32, 16384, 81, 132) is None


def test_the_launcher_sends_17_to_64_rows_to_the_bulk_copied_kernel(monkeypatch):
    import pytest
    import torch

    from kernels.nvfp4 import gemm_ws

    launched = []
    monkeypatch.setattr(gemm_ws, "launch_bulk", lambda x, p, out, s, t, b: launched.append((s, t, b)) or out)
    monkeypatch.setattr(gemm_wgmma._compile, "num_sms", lambda device: 132)
    p = {"N": 16384, "K": 5120, "Kc": 80, "Np": 16384}
    x, out = torch.zeros(48, 5120, dtype=torch.bfloat16), torch.zeros(48, 16384, dtype=torch.bfloat16)
    assert gemm_wgmma.gemm_wgmma(x, p, out) is out and launched == [(1, 64, 1)]
    # a tile or split asked for keeps the pick's kernels; so does SPARKINFER_NVFP4_WSB=0
    monkeypatch.setattr(gemm_wgmma, "_tile_and_splits", lambda *a: (_ for _ in ()).throw(RuntimeError("pick")))
    with pytest.raises(RuntimeError, match="pick"):
        gemm_wgmma.gemm_wgmma(x, p, out, tile=64)
    monkeypatch.setattr(gemm_ws, "WSB", False)
    with pytest.raises(RuntimeError, match="pick"):
        gemm_wgmma.gemm_wgmma(x, p, out)
    assert len(launched) == 1
