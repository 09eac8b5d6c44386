"""The wgmma GEMM launcher's CPU-side choices (kernels/nvfp4/gemm_wgmma.py): which M and grids go to the stream-K
kernel, and with how many waves of whole tiles first. The numbers are the 27B layer shapes on a 132-SM H200."""
from kernels.nvfp4 import gemm_wgmma

LAYER_SHAPES = [(10240, 5120), (6144, 5120), (5120, 6144), (17408, 5120), (5120, 17408), (12288, 5120)]


def _np(n: int) -> int:
    return -(-n // 128) * 128


def test_stream_k_for_prefill_sized_m_on_every_layer_shape():
    for n, k in LAYER_SHAPES:
        for m in (256, 512, 1000, 2048):
            assert gemm_wgmma.pick_stream_k(m, _np(n), k, 132) in (0, 1), (n, k, m)


def test_not_stream_k_outside_the_measured_range():
    for n, k in LAYER_SHAPES:
        for m in (1, 33, 128, 255, 2049, 8192):
            assert gemm_wgmma.pick_stream_k(m, _np(n), k, 132) == -1, (n, k, m)


def test_lm_head_keeps_whole_tiles_once_the_grid_is_many_waves():
    # 1940 row tiles: M = 256 is 14.7 waves of T = 256 tiles (stream-K), M = 512 29.4 (the pick's whole tiles)
    assert gemm_wgmma.pick_stream_k(256, _np(248320), 5120, 132) == 0
    assert gemm_wgmma.pick_stream_k(512, _np(248320), 5120, 132) == -1
    # a GPU with fewer SMs reaches the wave limit sooner
    assert gemm_wgmma.pick_stream_k(256, _np(248320), 5120, 66) == -1


def test_one_wave_of_whole_tiles_first_where_x_outgrows_the_l2():
    # x = M x K bf16: 2048 x 17408 x 2 = 71 MB runs its first wave whole; 1024 x 17408 x 2 = 35.7 MB does not
    assert gemm_wgmma.pick_stream_k(2048, 5120, 17408, 132) == 1
    assert gemm_wgmma.pick_stream_k(1024, 5120, 17408, 132) == 0
    assert gemm_wgmma.pick_stream_k(2048, 17408, 5120, 132) == 0
