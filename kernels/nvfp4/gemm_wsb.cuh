// gemm_wsb.cuh (included by gemm_wgmma.cu after gemm_ws.cuh): gemm_ws's warp-specialised main loop for one token
// tile (M <= T: decode batches of 17-64 rows, gemm_ws.bulk_choice), fed by bulk copies of CH chunks at a time. The
// repacked weights keep a 16-row tile's chunks contiguous ([Np/16, Kc, 512 B] fragments, [Np/16, Kc, 64 B] scales)
// and xq keeps a lone token tile's chunks contiguous ([Kc][T][64] bf16), so one stage of CH chunks is 17 bulk copies
// (x: CH x T x 128 B; each of the 8 fragment tiles: CH x 512 B; each tile's scales: CH x 64 B) where gemm_ws
// issues 288 16-byte cp.async a chunk. Stage layout: x tiles [CH][T rows][128 B] (swizzled by the permute),
// fragments [8][CH][512 B], scales [8][CH][64 B]. Needs Kc % CH == 0 and M <= T (the launcher checks). Session 18
// (kernels/nvfp4/NOTES.md): at one block a SM a 128-row x 64-k chunk takes ~368 ns against gemm_wgmma T = 32's ~435.
#pragma once

template <int T, int CH>
struct Wsb {
    static constexpr u32 X = CH * T * 128, W = 8 * CH * 512, SC = 8 * CH * 64;
    static constexpr u32 SB = (X + W + SC + 1023u) & ~1023u;  // 1 KB aligned (the x tiles' swizzle atoms)
};

// the producer warp: chunk groups g0 .. g0 + ng - 1 of row tile rb (chunks CH g ..), stage i % S
template <int T, int S, int CH>
__device__ __forceinline__ void wsb_produce(const unsigned char* wq, const unsigned char* wsc, const u16* xq, int Kc,
                                            int rb, int g0, int ng, u32 base, u32 full, u32 empty) {
    using L = Wsb<T, CH>;
    const int lane = threadIdx.x & 31;
    for (int i = 0; i < ng; ++i) {
        const int s = i % S;
        const u64 c = (u64)(g0 + i) * CH;
        if (i >= S) mbar_wait(empty + 8 * s, (i / S - 1) & 1);
        const u32 st = base + s * L::SB;
        if (lane == 0) mbar_expect_tx(full + 8 * s, L::X + L::W + L::SC);
        __syncwarp();
        if (lane == 0) bulk_load(st, xq + c * T * 64, L::X, full + 8 * s);
        if (lane >= 1 && lane <= 8) {
            const int j = lane - 1;
            bulk_load(st + L::X + j * CH * 512, wq + ((u64)(rb * 8 + j) * Kc + c) * 512, CH * 512, full + 8 * s);
        }
        if (lane >= 9 && lane <= 16) {
            const int j = lane - 9;
            bulk_load(st + L::X + L::W + j * CH * 64, wsc + ((u64)(rb * 8 + j) * Kc + c) * 64, CH * 64, full + 8 * s);
        }
    }
}

// one MMA warp's chunk i (A registers a), as gemm_ws's ws_step: at a stage's first chunk wait for the stage and,
// once the group before (the previous stage's last chunk) retired, free that stage
template <int T, int S, int CH>
__device__ __forceinline__ void wsb_step(int i, u32 (&a)[4][4], float (&acc)[T / 2], u32 base, const u32* lut,
                                         u32 full, u32 empty) {
    using L = Wsb<T, CH>;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = i / CH, q = i - g * CH, s = g % S;
    const u32 st = base + s * L::SB;
    if (q == 0) mbar_wait(full + 8 * s, (g / S) & 1);
    const uint4 f = lds128(st + L::X + (warp * CH + q) * 512 + lane * 16);
    const u32 sc = lds_u16(st + L::X + L::W + (warp * CH + q) * 64 + lane * 2);
    const u32 sg = lut[sc & 0xFFu], sg8 = lut[sc >> 8];
    decode_word(f.x, sg, sg8, a[0]);
    decode_word(f.y, sg, sg8, a[1]);
    decode_word(f.z, sg, sg8, a[2]);
    decode_word(f.w, sg, sg8, a[3]);
    ws_chunk_mma<T>(st + q * T * 128, a, acc);
    if (q == 0 && g > 0 && lane == 0) mbar_arrive(empty + 8 * ((g - 1) % S));
}

// the MMA warps: acc = the sums of nc chunks (ng stages of CH)
template <int T, int S, int CH>
__device__ __forceinline__ void wsb_consume(float (&acc)[T / 2], int nc, u32 base, const u32* lut, u32 full,
                                            u32 empty) {
#pragma unroll
    for (int i = 0; i < T / 2; ++i) acc[i] = 0.0f;
    u32 a0[4][4], a1[4][4];
    int i = 0;
    for (; i + 1 < nc; i += 2) {
        wsb_step<T, S, CH>(i, a0, acc, base, lut, full, empty);
        wsb_step<T, S, CH>(i + 1, a1, acc, base, lut, full, empty);
    }
    if (i < nc) wsb_step<T, S, CH>(i, a0, acc, base, lut, full, empty);
    wgmma_wait<0>();
    fence_regs(acc);
    mma_threads_sync<true>();
}

template <int T, int S, int CH, bool SK>
__device__ __forceinline__ void gemm_wsb_body(const unsigned char* wq, const unsigned char* wsc, const u16* xq,
                                              u16* y, const float* alpha, int M, int N, int Kc, int R, int group,
                                              int vec_out, float* ws, int* counters, int splits) {
    extern __shared__ unsigned char dsmem[];
    __shared__ u32 lut[256];
    __shared__ __align__(8) u64 bars[2 * S];
    __shared__ int s_last;
    const u32 raw = smem_u32(dsmem), base = (raw + 1023u) & ~1023u, full = smem_u32(bars), empty = full + 8 * S;
    if (threadIdx.x < 256) lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; ++s) mbar_init(full + 8 * s, 1), mbar_init(empty + 8 * s, 8);
        fence_mbarrier_init();
    }
    __syncthreads();
    const int groups = Kc / CH;
    const unsigned bid = SK ? blockIdx.x / splits : blockIdx.x;
    const int split = SK ? (int)(blockIdx.x - bid * splits) : 0;
    const int g0 = SK ? (int)((long long)groups * split / splits) : 0;
    const int ng = SK ? (int)((long long)groups * (split + 1) / splits) - g0 : groups;
    const int2 o = tile_origin(bid, M, T, R, group);
    if (threadIdx.x >= 256) {
        wsb_produce<T, S, CH>(wq, wsc, xq, Kc, o.x, g0, ng, base, full, empty);
        return;
    }
    float acc[T / 2];
    wsb_consume<T, S, CH>(acc, ng * CH, base, lut, full, empty);
    if constexpr (SK) {
        if (!split_flush<T, true>(acc, ws, counters, (int)bid, splits, M - o.y, &s_last)) return;
    }
    epilogue<T, true>(acc, (u16*)(dsmem + (base - raw)), y, alpha, o.x, o.y, M, N, vec_out);
}

// name, T, stages, chunks a stage, blocks a SM, split-K
#define WSB_KERNEL(name, t, s, ch, minb, sk) \
    extern "C" __global__ void __launch_bounds__(WS_THREADS, minb) name(const unsigned char *wq, \
            const unsigned char *wsc, const u16 *xq, u16 *y, const float *alpha, int M, int N, int K, int Kc, int R, \
            int group, int vec_out, float *ws, int *counters, int splits, int Mp) { \
        gemm_wsb_body<t, s, ch, sk>(wq, wsc, xq, y, alpha, M, N, Kc, R, group, vec_out, ws, counters, splits); \
    }
WSB_KERNEL(nvfp4_gemm_wsb_t32, 32, 5, 4, 1, false)
WSB_KERNEL(nvfp4_gemm_wsb_t32_sk, 32, 5, 4, 1, true)
WSB_KERNEL(nvfp4_gemm_wsb_t64, 64, 4, 4, 1, false)
WSB_KERNEL(nvfp4_gemm_wsb_t64_sk, 64, 4, 4, 1, true)
// two blocks a SM (grids that are not one wave of row tiles): fewer stages, T = 64 stages of 2 chunks
WSB_KERNEL(nvfp4_gemm_wsb_t32_b2, 32, 3, 4, 2, false)
WSB_KERNEL(nvfp4_gemm_wsb_t32_b2_sk, 32, 3, 4, 2, true)
WSB_KERNEL(nvfp4_gemm_wsb_t64_b2, 64, 4, 2, 2, false)
WSB_KERNEL(nvfp4_gemm_wsb_t64_b2_sk, 64, 4, 2, 2, true)
