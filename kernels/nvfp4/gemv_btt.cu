// NVFP4 GEMV v14 ("block tiles, TMA ring"), M = 1: y[1, N] = x[1, K] W^T, f32 sums, bf16 out. v12's split (gemv_bt.cu:
// one block per SM owns whole 16-row tiles, split tiles meet in shared memory) and v10's decode, MMA and layouts
// (gemv_bc.cu, gemv_bc_pairs.cuh); only the weight stream differs.
//
// Why: v12 holds its weights in flight in registers (2-3 chunk pairs a warp), so the stream stalls while a warp
// decodes. Here a producer warp streams the block's slice of fragments and scale words (contiguous in the repacked
// layout: tiles [t0, t0 + nt) are nt * Kc * 512 B of fragments, nt * Kp * 128 B of scale words) into a ring of up
// to ~200 KB of shared memory with cp.async.bulk (TMA, PTX ISA "cp.async.bulk"), one mbarrier a stage. The first P
// stages go out at the block's start, before griddepcontrol.wait and x, so the stream overlaps the kernel before;
// the rest once x is staged (H200 session 23: with every stage issued first, x's loads queued behind the whole
// slice and landed 5.5 us after the kernel before on 17408x5120, against 2.0 us with ~55 KB a block ahead of them).
// A stage is SP chunk pairs of the slice in order; its SP / SUB items of SUB pairs (never across a tile: SUB
// divides Kp) go to the TW compute warps round-robin, each adding its item's 16 row sums into the block's shared
// accumulators (red.shared). H200 session 21 (NOTES.md): the LM head 181.8 -> 166.5 us (the read floor), 5120x17408
// 20.3 -> 18.6; no gain on 17.7-35 MB weights with K = 5120.
//
// Pipeline: full[r] completes when stage s (slot r = s % R) has landed (expect_tx by the producer); empty[r] when
// its SP / SUB items are consumed, after which the producer refills the slot with stage s + R. A consumer first
// waits until stage s is issued (`issued`), so the parity it waits on is stage s's phase: a fast warp cannot take
// an older phase of its slot for its own (warps take items round-robin and may run R stages apart).
// Needs Kc even, SUB | Kp, at most BTT_MAX_TILES tiles a block, R >= 2 stages in shared memory (gemv_bt.py checks).
#include "bulk_ptx.cuh"
#include "gemv_bc_pairs.cuh"

#define BTT_MAX_TILES 128  // tiles per block (shared accumulators: 8 KB)
#define BTT_MAX_RING 48    // ring stages at most (mbarriers)
#define BTT_PAIR_BYTES 1152  // a chunk pair: two 512-byte fragments (one a chunk) and a 128-byte scale word row

struct Ring {
    u32 base;  // shared address of slot 0: [R][SP * 1024 B fragments | SP * 128 B scale words]
    unsigned long long* full;
    unsigned long long* empty;
    volatile int* issued;
    int R;
};

// the producer (one thread) issues stages [s0, s1) of the block's slice (pairs [0, npairs) from pair 0 of tile t0)
template <int SP>
__device__ void issue_stages(const GemvArgs& p, const Ring& ring, int t0, int npairs, int s0, int s1) {
    const int kp = p.Kc >> 1;
    const char* frag = (const char*)(p.wq + (u64)t0 * p.Kc * 32);
    const char* scale = (const char*)p.wsc + (u64)t0 * kp * 128;
    for (int s = s0; s < s1; ++s) {
        const int r = s % ring.R;
        if (s >= ring.R) mbar_wait(&ring.empty[r], ((s / ring.R) - 1) & 1);
        const u32 n = min(SP, npairs - s * SP), slot = ring.base + r * SP * BTT_PAIR_BYTES, bar = smem_u32(&ring.full[r]);
        mbar_expect_tx(bar, n * BTT_PAIR_BYTES);
        bulk_load(slot, frag + (u64)s * SP * 1024, n * 1024, bar);
        bulk_load(slot + SP * 1024, scale + (u64)s * SP * 128, n * 128, bar);
        __threadfence_block();  // the phase armed above before the consumers read `issued`
        *ring.issued = s + 1;
    }
}

// compute warp `warp` of TW: its items of SUB pairs, each added into sums[tile * 16 + row]
template <int SP, int SUB, int TW>
__device__ void consume_items(const GemvArgs& p, const Ring& ring, const uint4* xs, int npairs, float* sums) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, kp = p.Kc >> 1;
    const u32 x0 = smem_u32(xs), zero = x0 + kp * 256;
    const u32 xb[2] = {g == t ? x0 + 32 * t : zero, g == t + 4 ? x0 + 128 + 32 * t : zero};
    const u32 step[2] = {g == t ? 256u : 0u, g == t + 4 ? 256u : 0u};
    for (int it = warp; it < npairs / SUB; it += TW) {
        const int s = it / (SP / SUB), r = s % ring.R, pair = it * SUB, lt = pair / kp, q0 = pair - lt * kp;
        while (*ring.issued <= s) {
        }
        mbar_wait(&ring.full[r], (s / ring.R) & 1);
        const u32 w = ring.base + r * SP * BTT_PAIR_BYTES + (pair - s * SP) * 1024;
        const u32 sc = ring.base + r * SP * BTT_PAIR_BYTES + SP * 1024 + (pair - s * SP) * 128 + lane * 4;
        float sum_g = 0.0f, sum_g8 = 0.0f;
#pragma unroll
        for (int u = 0; u < SUB; u += 2) {
            PairGroup<2> grp;
#pragma unroll
            for (int v = 0; v < 2; ++v) {
                grp.w[v][0] = lds16(w + (u + v) * 1024 + lane * 16);
                grp.w[v][1] = lds16(w + (u + v) * 1024 + 512 + lane * 16);
                asm volatile("ld.shared.u32 %0, [%1];" : "=r"(grp.s[v]) : "r"(sc + (u + v) * 128));
            }
            compute_pairs<2, MODE_NORMAL>(grp, q0 + u, q0 + u + 2, xb, step, sum_g, sum_g8);
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(smem_u32(&ring.empty[r]));
        sum_g += __shfl_xor_sync(0xFFFFFFFFu, sum_g, 1);
        sum_g8 += __shfl_xor_sync(0xFFFFFFFFu, sum_g8, 1);
        sum_g += __shfl_xor_sync(0xFFFFFFFFu, sum_g, 2);
        sum_g8 += __shfl_xor_sync(0xFFFFFFFFu, sum_g8, 2);
        if (t == 0) {
            atomicAdd(&sums[lt * 16 + g], sum_g);
            atomicAdd(&sums[lt * 16 + g + 8], sum_g8);
        }
    }
}

// TW compute warps, which stage x, and one producer warp (warp TW), which streams the weights: P stages before x
// is staged, the rest after
template <int SP, int SUB, int TW, int XS>
__device__ void btt_body(const GemvArgs& p, int R, int P) {
    __shared__ float sums[BTT_MAX_TILES * 16];
    __shared__ __align__(8) unsigned long long full[BTT_MAX_RING], empty[BTT_MAX_RING];
    __shared__ int issued;
    __shared__ volatile int x_staged;
    extern __shared__ __align__(128) uint4 dyn[];
    pdl_launch_dependents();
    const int kp = p.Kc >> 1, T = p.Np / 16, G = gridDim.x, b = blockIdx.x;
    const int t0 = (int)((long long)T * b / G), nt = (int)((long long)T * (b + 1) / G) - t0;
    const int npairs = nt * kp, nstages = (npairs + SP - 1) / SP;
    const Ring ring{smem_u32(dyn), full, empty, &issued, R};
    uint4* xs = (uint4*)((char*)dyn + R * SP * BTT_PAIR_BYTES);
    for (int i = threadIdx.x; i < nt * 16; i += blockDim.x) sums[i] = 0.0f;
    if (threadIdx.x == 0) {
        for (int r = 0; r < R; ++r) mbar_init(&full[r], 1), mbar_init(&empty[r], SP / SUB);
        issued = 0;
        x_staged = 0;
        fence_mbarrier_init();
    }
    __syncthreads();
    if (threadIdx.x >= TW * 32) {  // the weights need nothing from the kernels before
        if (threadIdx.x == TW * 32) {
            const int ahead = min(P, nstages);
            issue_stages<SP>(p, ring, t0, npairs, 0, ahead);
            if (ahead < nstages) {
                while (!x_staged) {
                }
                issue_stages<SP>(p, ring, t0, npairs, ahead, nstages);
            }
        }
        return;
    }
    pdl_wait();
    stage_x_mode<XS, 1>(p, xs, kp, TW * 32);
    asm volatile("bar.sync 1, %0;" ::"r"(TW * 32));
    if (threadIdx.x == 0) x_staged = 1;
    consume_items<SP, SUB, TW>(p, ring, xs, npairs, sums);
    asm volatile("bar.sync 1, %0;" ::"r"(TW * 32));
    for (int j = threadIdx.x; j < nt * 16; j += TW * 32) {
        const int lt = j >> 4, n = (t0 + lt) * 16 + (j & 15);
        if (n < p.N) p.y[n] = f32_to_bf16(sums[j] * p.alpha[t0 + lt]);
    }
}

#define BTT_PARAMS \
    const uint4 *wq, const u32 *wsb, const u16 *x, u16 *y, const float *alpha, int N, int K, int Np, int Kc, int R, \
        int P
#define BTT_ARGS GemvArgs{wq, (const u16*)wsb, x, y, nullptr, nullptr, alpha, 1, N, K, Np, Kc}
#define BTT_BOUNDS(TW) __launch_bounds__(32 * (TW + 1), 1)
// entries nvfp4_gemv_btt{mode}_{SP}_{SUB}_{TW}: x plain, or computed while staged as gemv_bt.cu's _silu / _norm /
// _gnorm entries (gemv_bt_stage.cuh)
#define BTT_KERNELS(SP, SUB, TW)                                                                                     \
    extern "C" __global__ void BTT_BOUNDS(TW) nvfp4_gemv_btt_##SP##_##SUB##_##TW(BTT_PARAMS) {                      \
        btt_body<SP, SUB, TW, XS_PLAIN>(BTT_ARGS, R, P);                                                               \
    }                                                                                                               \
    extern "C" __global__ void BTT_BOUNDS(TW) nvfp4_gemv_btt_silu_##SP##_##SUB##_##TW(BTT_PARAMS, const u16* x_up) { \
        GemvArgs p = BTT_ARGS;                                                                                      \
        p.x_up = x_up;                                                                                              \
        btt_body<SP, SUB, TW, XS_SILU>(p, R, P);                                                                       \
    }                                                                                                               \
    extern "C" __global__ void BTT_BOUNDS(TW) nvfp4_gemv_btt_norm_##SP##_##SUB##_##TW(                              \
        BTT_PARAMS, const u16* x_res, const u16* norm_w, float eps, u16* h_out, u16* y_out) {                       \
        GemvArgs p = BTT_ARGS;                                                                                      \
        p.x_res = x_res, p.norm_w = norm_w, p.eps = eps, p.h_out = h_out, p.y_out = y_out;                          \
        btt_body<SP, SUB, TW, XS_NORM>(p, R, P);                                                                       \
    }                                                                                                               \
    extern "C" __global__ void BTT_BOUNDS(TW) nvfp4_gemv_btt_gnorm_##SP##_##SUB##_##TW(                             \
        BTT_PARAMS, const u16* z, const u16* norm_w, float eps) {                                                   \
        GemvArgs p = BTT_ARGS;                                                                                      \
        p.x_up = z, p.norm_w = norm_w, p.eps = eps;                                                                 \
        btt_body<SP, SUB, TW, XS_GNORM>(p, R, P);                                                                      \
    }
BTT_KERNELS(16, 4, 16)
BTT_KERNELS(8, 8, 16)
BTT_KERNELS(16, 4, 24)
