// NVFP4 GEMV v12m ("block tiles", several rows): y[M, N] = x[M, K] W^T for M = 2..16, f32 sums, bf16 out. The
// per-warp segment is v7's (gemv_core.cuh gemv_segment: e4m3 block scales applied in the decode, NT = 1 or 2 n8 tiles
// of x rows, x staged once per block in shared memory, the first weight loads before griddepcontrol.wait); the work
// split is v12's (gemv_bt.cu): one block of 16 warps per SM owns whole 16-row tiles, tiles [T b / G, T (b + 1) / G)
// for block b of G, and its tile x chunk items are split evenly over its warps. A warp whose segment covers a whole
// tile stores it; split tiles add into shared accumulators (red.shared) and are stored after one barrier. No split-K
// workspace, counters, fences or global atomics (v7's flush of partial row groups: 4.3 us at M = 16 on 17408x5120).
// Needs K % 8 == 0, K >= 16, x staged in the dynamic shared memory, at most BTM_MAX_TILES tiles a block and at least
// BTM_WARPS chunks a block (every warp takes part in the staging barrier); gemv_bt.py checks.
#include "gemv_core.cuh"

#define BTM_WARPS 16
#define BTM_MAX_TILES 24  // tiles per block: shared accumulators of 24 x 16 rows x 16 columns f32 = 24 KB at NT = 2

template <int NT, int U>
__device__ void btm_body(const GemvArgs& p) {
    __shared__ u32 lut[256];
    __shared__ float sums[BTM_MAX_TILES][NT * 8][16];  // [tile][row m of x][row of the tile]
    __shared__ int split[BTM_MAX_TILES];
    extern __shared__ uint4 xs[];
    pdl_launch_dependents();
    const int T = p.Np / 16, G = gridDim.x, b = blockIdx.x;
    const int t0 = (int)((long long)T * b / G), nt = (int)((long long)T * (b + 1) / G) - t0;
    for (int i = threadIdx.x; i < nt * NT * 128; i += blockDim.x) (&sums[0][0][0])[i] = 0.0f;
    for (int i = threadIdx.x; i < nt; i += blockDim.x) split[i] = 0;
    if (threadIdx.x < 256) lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, items = nt * p.Kc;
    int i = items * warp / BTM_WARPS;
    const int end = items * (warp + 1) / BTM_WARPS;
    bool first = true;
    while (i < end) {
        const int lt = i / p.Kc, ca = i - lt * p.Kc, cb = min(p.Kc, ca + (end - i));
        float acc[NT][4];
        gemv_segment<NT, U, MODE_NORMAL, true, true>(p, t0 + lt, ca, cb, lut, acc, xs, first);
        first = false;
        if (cb - ca == p.Kc) {
            store_y<NT>(YOut{p.y, p.alpha, p.M, p.N}, t0 + lt, acc);
        } else {
            if (lane == 0) split[lt] = 1;
#pragma unroll
            for (int q = 0; q < NT; ++q)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (acc_m(q, e) < p.M) atomicAdd(&sums[lt][acc_m(q, e)][acc_n(0, e)], acc[q][e]);
        }
        i += cb - ca;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < nt * NT * 128; j += blockDim.x) {
        const int lt = j / (NT * 128), m = (j >> 4) % (NT * 8), n = (t0 + lt) * 16 + (j & 15);
        if (split[lt] && m < p.M && n < p.N)
            p.y[(u64)m * p.N + n] = f32_to_bf16((&sums[0][0][0])[j] * p.alpha[t0 + lt]);
    }
}

#define BTM_PARAMS const uint4* wq, const u16* wsc, const u16* x, u16* y, const float* alpha, int M, int N, int K, \
                   int Np, int Kc
#define BTM_ARGS GemvArgs{wq, wsc, x, y, nullptr, nullptr, alpha, M, N, K, Np, Kc}
// U = chunks per half-buffer as gemv.cu's x-staged kernels (NT = 1: 6, NT = 2: 4)
#define BTM_KERNEL(name, NT, U) \
    extern "C" __global__ void __launch_bounds__(512, 1) name(BTM_PARAMS) { btm_body<NT, U>(BTM_ARGS); }
BTM_KERNEL(nvfp4_gemv_btm_nt1, 1, 6)
BTM_KERNEL(nvfp4_gemv_btm_nt2, 2, 4)
