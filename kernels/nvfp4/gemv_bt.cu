// NVFP4 GEMV v12 ("block tiles"), M = 1: y[1, N] = x[1, K] W^T, f32 sums, bf16 out. The decode, MMA and layouts are
// v10's (gemv_bc.cu, gemv_bc_pairs.cuh); only the work split differs.
//
// Why: v10 splits (row group, chunk pair) items evenly over 2 blocks per SM, so most row groups are shared by several
// blocks and reduced through global memory at the end (red.add, fence, counter, read-back: serial round trips that
// cost 2.0-2.6 us per launch on the 27B layer shapes, NOTES.md session 12). Here one block of 16 warps per SM owns
// whole 16-row tiles, tiles [T b / G, T (b + 1) / G) of T for block b of G, so no sum leaves the block: the block's
// tile x pair items are split evenly over its 16 warps, a warp's segment that covers a whole tile stores it directly,
// partial segments add their 16 row sums into the block's shared accumulators (red.shared), and after one barrier
// the block stores those tiles. No workspace, counters, fences or global atomics. It pays where T / G is near a
// whole number (ops / gemv_bt.py picks the shapes); each block streams up to ceil(T / G) tiles.
// Programmatic dependent launch as v10: each warp issues its first weight loads, then griddepcontrol.wait before x.
// Needs K % 8 == 0, x 16-byte aligned, at most BT_MAX_TILES tiles per block and at least BT_WARPS pairs per block
// (every warp takes part in the x-staging barrier of its first segment); gemv_bt.py checks.
#include "gemv_bc_pairs.cuh"

#define BT_WARPS 16
#define BT_MAX_TILES 128  // tiles per block (shared accumulators: 8 KB)

template <int U, int XS>
__device__ void bt_body(const GemvArgs& p) {
    __shared__ float sums[BT_MAX_TILES * 16];
    __shared__ int shared_tile[BT_MAX_TILES];  // 1: the tile's pairs are split over warps (sums holds it)
    extern __shared__ uint4 xs[];
    pdl_launch_dependents();
    const int kp = (p.Kc + 1) >> 1, T = p.Np / 16, G = gridDim.x, b = blockIdx.x;
    const int t0 = (int)((long long)T * b / G), nt = (int)((long long)T * (b + 1) / G) - t0;
    for (int i = threadIdx.x; i < nt * 16; i += blockDim.x) sums[i] = 0.0f;  // ordered by pair_segment's barrier
    for (int i = threadIdx.x; i < nt; i += blockDim.x) shared_tile[i] = 0;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int items = nt * kp;
    int i = items * warp / BT_WARPS;
    const int end = items * (warp + 1) / BT_WARPS;
    bool first = true;
    while (i < end) {
        const int lt = i / kp, qa = i - lt * kp, qb = min(kp, qa + (end - i));
        float acc[1][4];
        pair_segment<U, MODE_NORMAL, XS>(p, t0 + lt, qa, qb, xs, first, acc);
        first = false;
        if (qb - qa == kp) {
            store_y<1>(YOut{p.y, p.alpha, 1, p.N}, t0 + lt, acc);
        } else if ((lane & 3) == 0) {
            shared_tile[lt] = 1;
            atomicAdd(&sums[lt * 16 + (lane >> 2)], acc[0][0]);
            atomicAdd(&sums[lt * 16 + (lane >> 2) + 8], acc[0][2]);
        }
        i += qb - qa;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < nt * 16; j += blockDim.x) {
        const int lt = j >> 4, n = (t0 + lt) * 16 + (j & 15);
        if (shared_tile[lt] && n < p.N) p.y[n] = f32_to_bf16(sums[j] * p.alpha[t0 + lt]);
    }
}

#define BT_PARAMS \
    const uint4* wq, const u32* wsb, const u16* x, u16* y, const float* alpha, int N, int K, int Np, int Kc
#define BT_ARGS GemvArgs{wq, (const u16*)wsb, x, y, nullptr, nullptr, alpha, 1, N, K, Np, Kc}
#define BT_KERNEL(name, U) \
    extern "C" __global__ void __launch_bounds__(512, 1) name(BT_PARAMS) { bt_body<U, XS_PLAIN>(BT_ARGS); }
BT_KERNEL(nvfp4_gemv_bt_u2, 2)
BT_KERNEL(nvfp4_gemv_bt_u3, 3)

// x = silu(gate) * up staged in place of x (x the gate row, x_up the up row): the MLP's down projection at M = 1
// without the silu_mul launch before it (gemv_bt.py silu_mul_linear)
#define BT_SILU_KERNEL(name, U)                                                                  \
    extern "C" __global__ void __launch_bounds__(512, 1) name(BT_PARAMS, const u16* x_up) {     \
        GemvArgs p = BT_ARGS;                                                                    \
        p.x_up = x_up;                                                                           \
        bt_body<U, XS_SILU>(p);                                                                   \
    }
BT_SILU_KERNEL(nvfp4_gemv_bt_silu_u2, 2)
BT_SILU_KERNEL(nvfp4_gemv_bt_silu_u3, 3)

// x = RMSNorm(x + x_res) staged in place of x (the residual add and zero-centred norm before a projection; block 0
// writes h_out = x + x_res and the normalised y_out for the residual stream and the layer's other readers): the first
// projection after a norm at M = 1 without the norm launch before it (gemv_bt.py rms_norm_linear)
#define BT_NORM_KERNEL(name, U)                                                                            \
    extern "C" __global__ void __launch_bounds__(512, 1)                                                  \
        name(BT_PARAMS, const u16* x_res, const u16* norm_w, float eps, u16* h_out, u16* y_out) {         \
        GemvArgs p = BT_ARGS;                                                                              \
        p.x_res = x_res, p.norm_w = norm_w, p.eps = eps, p.h_out = h_out, p.y_out = y_out;                 \
        bt_body<U, XS_NORM>(p);                                                                            \
    }
BT_NORM_KERNEL(nvfp4_gemv_bt_norm_u2, 2)
BT_NORM_KERNEL(nvfp4_gemv_bt_norm_u3, 3)

// x = the GDN output's gated RMSNorm per 128-wide head (gate z, weight norm_w [128]) staged in place of x: out_proj at
// M = 1 without the norm_rms_gated launch before it (gemv_bt.py gated_norm_linear)
#define BT_GNORM_KERNEL(name, U)                                                                  \
    extern "C" __global__ void __launch_bounds__(512, 1)                                         \
        name(BT_PARAMS, const u16* z, const u16* norm_w, float eps) {                            \
        GemvArgs p = BT_ARGS;                                                                     \
        p.x_up = z, p.norm_w = norm_w, p.eps = eps;                                               \
        bt_body<U, XS_GNORM>(p);                                                                  \
    }
BT_GNORM_KERNEL(nvfp4_gemv_bt_gnorm_u2, 2)
BT_GNORM_KERNEL(nvfp4_gemv_bt_gnorm_u3, 3)
