// gemm_ws.cuh (included at the end of gemm_wgmma.cu): a warp-specialised variant of its T = 64 and T = 128 GEMMs,
// for 33-128 rows (decode batches, short prefills; the _ws kernels). Same tile, stage layout, decode, wgmma and
// epilogue; what differs is who copies and who waits. gemm_wgmma.cu's blocks meet at a block barrier every 64-k chunk (x came from every thread),
// so each chunk's chain (copy wait, decode, barrier, wgmma, group wait) sets the pace at small M (~0.42 us a chunk,
// kernels/nvfp4/NOTES.md session 9). Here a 9th warp produces: per chunk, once the stage is free (its `empty`
// mbarrier), lane 0 bulk-copies (TMA, non-tensor) the x tile and the 32 lanes cp.async the 8 weight fragments and
// scales (9 x 16 bytes a lane), each lane's copies arriving on the stage's `full` mbarrier when they land. Each MMA
// warp waits for `full`, decodes, issues its warpgroup's wgmma, and once its previous group has retired
// (wgmma.wait_group 1) arrives on that stage's `empty` (8 arrivals free a stage): no block barrier in the main loop,
// the warpgroups meet only through the 8-deep ring. (Session 10, device run 4: the fragments and scales as 16 bulk
// copies a chunk were 1.4-2x slower than gemm_wgmma, each MMA warp copying its own 8-25% slower than this.)
// x goes through nvfp4_permute_x_sw first: xq [Kc][Mp][64] bf16, Mp = M rounded up to T (rows past M zero), chunk
// c's T rows of a tile contiguous (one bulk copy) and row m's 16-byte units already in the 128-byte swizzle (unit u
// at u ^ (m & 7)), which a plain bulk copy cannot apply.
// PTX ISA 8.0: "mbarrier", "cp.async.bulk", cp.async.mbarrier.arrive; the pattern is CUTLASS's warp-specialised
// producer / consumer main loop.

#include "bulk_ptx.cuh"

#define WS_THREADS 288  // 256 MMA threads (2 warpgroups) + the producer warp

// the producer warp: chunks c0 .. c0 + nc - 1 of row tile rb (8 fragment tiles from 8 rb), tokens m0 ..: chunk i
// is the block's ring chunk j = g0 + i (g0: chunks the ring carried before, stream-K's earlier pieces), stage j % S
// once the MMA warps have freed it, then the x tile (lane 0, one bulk copy, expected bytes) and 16 bytes of each
// fragment tile and of the scales a lane (cp.async; lane l's scale piece: tile l / 4, piece l % 4)
template <int T, int S>
__device__ __forceinline__ void ws_produce(const unsigned char* wq, const unsigned char* wsc, const u16* xq, int Mp,
                                           int Kc, int rb, int m0, int c0, int nc, u32 base, u32 full, u32 empty,
                                           int g0 = 0) {
    constexpr u32 SB = T * 128 + 5120;
    const int lane = threadIdx.x & 31;
    for (int i = 0; i < nc; ++i) {
        const int j = g0 + i, s = j % S;
        const u64 c = (u64)(c0 + i);
        if (j >= S) mbar_wait(empty + 8 * s, (j / S - 1) & 1);
        const u32 st = base + s * SB;
        if (lane == 0) {
            mbar_expect_tx(full + 8 * s, T * 128);
            bulk_load(st, xq + (c * Mp + m0) * 64, T * 128, full + 8 * s);
        }
#pragma unroll
        for (int j = 0; j < 8; ++j)
            cp_async16(st + T * 128 + j * 512 + lane * 16, wq + ((u64)(rb * 8 + j) * Kc + c) * 512 + lane * 16);
        cp_async16(st + T * 128 + 4096 + lane * 16,
                   wsc + ((u64)(rb * 8 + (lane >> 2)) * Kc + c) * 64 + (lane & 3) * 16);
        cp_async_mbar_arrive(full + 8 * s);
    }
}

// the warpgroup's 4 wgmma of one chunk as one group (A registers a, the x tile at shared address xs), then wait for
// the group before it (wgmma.wait_group 1: the other A register set is free again)
template <int T>
__device__ __forceinline__ void ws_chunk_mma(u32 xs, u32 (&a)[4][4], float (&acc)[T / 2]) {
    u64 desc[4];
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) desc[ks] = desc_sw128(xs + 32 * ks);
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {  // every operand final before the batch opens (as chunk_step)
        asm volatile("" : "+l"(desc[ks]));
        asm volatile("" : "+r"(a[ks][0]), "+r"(a[ks][1]), "+r"(a[ks][2]), "+r"(a[ks][3]));
    }
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) wgmma_tile<T>(acc, a[ks], desc[ks]);
    wgmma_commit();
    wgmma_wait<1>();
}

// one MMA warp's ring chunk i (A registers a): wait for its stage, decode this warp's fragment, the warpgroup's 4
// wgmma as one group, then (group i - 1 retired) free stage i - 1 where `prev` (chunk i - 1 is this piece's)
template <int T, int S>
__device__ __forceinline__ void ws_step(int i, bool prev, u32 (&a)[4][4], float (&acc)[T / 2], u32 base,
                                        const u32* lut, u32 full, u32 empty) {
    constexpr u32 SB = T * 128 + 5120;
    const int lane = threadIdx.x & 31, s = i % S;
    mbar_wait(full + 8 * s, (i / S) & 1);
    const u32 st = base + s * SB;
    decode_stage_fragment<T>(st, lut, a);
    ws_chunk_mma<T>(st, a, acc);
    if (prev && lane == 0) mbar_arrive(empty + 8 * ((i - 1) % S));
}

// the MMA warps: acc = the sums of nc chunks, ring chunks g0 .. g0 + nc - 1; at the end every group retired, the
// last stage freed where `release_last` (the ring goes on: stream-K's next piece), and the 256 threads met (without
// release_last the ring is then free for the epilogue's staging)
template <int T, int S>
__device__ __forceinline__ void ws_consume(float (&acc)[T / 2], int nc, u32 base, const u32* lut, u32 full,
                                           u32 empty, int g0 = 0, bool release_last = false) {
#pragma unroll
    for (int i = 0; i < T / 2; ++i) acc[i] = 0.0f;
    u32 a0[4][4], a1[4][4];
    int i = 0;
    for (; i + 1 < nc; i += 2) {
        ws_step<T, S>(g0 + i, i > 0, a0, acc, base, lut, full, empty);
        ws_step<T, S>(g0 + i + 1, true, a1, acc, base, lut, full, empty);
    }
    if (i < nc) ws_step<T, S>(g0 + i, i > 0, a0, acc, base, lut, full, empty);
    wgmma_wait<0>();
    fence_regs(acc);
    if (release_last && (threadIdx.x & 31) == 0) mbar_arrive(empty + 8 * ((g0 + nc - 1) % S));
    mma_threads_sync<true>();
}

// the scale table and the ring's mbarriers (full: lane 0's expect_tx + the 32 lanes' cp.async arrivals; empty: the 8
// MMA warps), then the whole block meets
template <int S>
__device__ __forceinline__ void ws_setup(u32* lut, u32 full, u32 empty) {
    if (threadIdx.x < 256) lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; ++s) mbar_init(full + 8 * s, 33), mbar_init(empty + 8 * s, 8);
        fence_mbarrier_init();
    }
    __syncthreads();
}

// gemm_body's work split (tile_origin, split-K ranges and flush, epilogue) with the warp-specialised main loop
template <int T, int S, bool SK>
__device__ __forceinline__ void gemm_ws_body(const unsigned char* wq, const unsigned char* wsc, const u16* xq, u16* y,
                                             const float* alpha, int M, int N, int Kc, int R, int group, int vec_out,
                                             float* ws, int* counters, int splits, int Mp) {
    extern __shared__ unsigned char dsmem[];
    __shared__ u32 lut[256];
    __shared__ __align__(8) u64 bars[2 * S];  // full[S], empty[S]
    __shared__ int s_last;
    const u32 raw = smem_u32(dsmem), base = (raw + 1023u) & ~1023u, full = smem_u32(bars), empty = full + 8 * S;
    ws_setup<S>(lut, full, empty);
    const unsigned bid = SK ? blockIdx.x / splits : blockIdx.x;
    const int split = SK ? (int)(blockIdx.x - bid * splits) : 0;
    const int c0 = SK ? (int)((long long)Kc * split / splits) : 0;
    const int nc = SK ? (int)((long long)Kc * (split + 1) / splits) - c0 : Kc;
    const int2 o = tile_origin(bid, M, T, R, group);
    if (threadIdx.x >= 256) {
        ws_produce<T, S>(wq, wsc, xq, Mp, Kc, o.x, o.y, c0, nc, base, full, empty);
        return;
    }
    float acc[T / 2];
    ws_consume<T, S>(acc, nc, base, lut, full, empty);
    if constexpr (SK) {
        if (!split_flush<T, true>(acc, ws, counters, (int)bid, splits, M - o.y, &s_last)) return;
    }
    epilogue<T, true>(acc, (u16*)(dsmem + (base - raw)), y, alpha, o.x, o.y, M, N, vec_out);
}

// x [M, K] -> xq [Kc][Mp][64] bf16 (see the top): one thread per 16-byte unit, zeros past M and K
extern "C" __global__ void __launch_bounds__(256) nvfp4_permute_x_sw(const u16* x, u16* xq, int M, int K, int Kc,
                                                                      int Mp) {
    const u64 i = (u64)blockIdx.x * 256 + threadIdx.x, cm = i >> 3;
    if (cm >= (u64)Kc * Mp) return;
    const int u = (int)(i & 7), m = (int)(cm % Mp), c = (int)(cm / Mp);
    const u32* row = (const u32*)(x + (u64)m * K);
    u32 w[4];
#pragma unroll
    for (int t = 0; t < 4; ++t) {
        const int k = 64 * c + 16 * t + 2 * u;
        w[t] = m < M && k < K ? __ldg(row + (k >> 1)) : 0u;
    }
    *(uint4*)(xq + cm * 64 + 8 * (u ^ (m & 7))) = make_uint4(w[0], w[1], w[2], w[3]);
}

// T = 64: 8 stages, 2 blocks a SM (gemm_wgmma's ring); _sk = split-K.
#define WS_KERNEL(name, t, s, minb, sk) \
    extern "C" __global__ void __launch_bounds__(WS_THREADS, minb) name(const unsigned char *wq, \
            const unsigned char *wsc, const u16 *xq, u16 *y, const float *alpha, int M, int N, int K, int Kc, int R, \
            int group, int vec_out, float *ws, int *counters, int splits, int Mp) { \
        gemm_ws_body<t, s, sk>(wq, wsc, xq, y, alpha, M, N, Kc, R, group, vec_out, ws, counters, splits, Mp); \
    }
WS_KERNEL(nvfp4_gemm_ws_t64, 64, 8, 2, false)
WS_KERNEL(nvfp4_gemm_ws_t64_sk, 64, 8, 2, true)
// T = 128: 6 stages, one block a SM (gemm_wgmma's ring). (T = 256 with 5 stages was 2-9% slower than gemm_wgmma's at
// M = 128-2048, 168 registers with spills: session 10 run 7, not built.)
WS_KERNEL(nvfp4_gemm_ws_t128, 128, 6, 1, false)
WS_KERNEL(nvfp4_gemm_ws_t128_sk, 128, 6, 1, true)
