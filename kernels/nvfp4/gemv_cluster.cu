// NVFP4 GEMV for M = 1..32 rows with split-K reduced inside a thread-block cluster (sm_90): y[M, N] = x W^T.
//
// Grid (CS, Np/128), cluster (CS, 1, 1) fixed at compile time: the CS blocks of cluster rg share row group rg
// (128 weight rows, 8 warps x one 16-row tile each, as gemv.cu) and split its Kc chunks evenly, block c taking
// [Kc c / CS, Kc (c+1) / CS). Each warp runs gemv.cu's segment (gemv_core.cuh) over its tile, then stores its
// accumulators in its own shared memory (part[warp][NT][lane], float4). After a cluster barrier (release/acquire),
// warp w of block w % CS sums part[w] of all CS blocks through distributed shared memory (mapa +
// ld.shared::cluster), scales by alpha and writes y; a second cluster barrier keeps every block's shared memory
// alive until the remote reads are done. No global workspace, counters, fences or atomics: the split-K flush of
// gemv.cu (2.2-2.6 us at M = 1, 3.2-4.3 us at M = 16 on the layer shapes, NOTES.md) becomes two hardware barriers.
// Measured (NOTES.md, session 3): faster than gemv.cu only where clusters of 2 fill a wave (the fused GDN and
// attention input projections), so ops.gemv uses it there (ops.cluster_size, CLUSTER_SIZE = 2).
#include "gemv_core.cuh"

__device__ __forceinline__ u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// the float4 at shared address `addr` of this block, in the shared memory of cluster block `rank`
__device__ __forceinline__ float4 ld_cluster(u32 addr, u32 rank) {
    u32 remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(remote) : "memory");
    return v;
}

template <int NT, int U, int CS>
__device__ void gemv_cluster_body(const GemvArgs& p) {
    __shared__ u32 lut[256];
    __shared__ float4 part[8][NT][32];
    pdl_launch_dependents();
    pdl_wait();  // PDL launch (ops.py): only the launch itself overlaps the kernel before
    lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, c = (int)cluster_rank();
    const int tile = blockIdx.y * 8 + warp;
    float acc[NT][4];
    gemv_segment<NT, U, MODE_NORMAL>(p, tile, p.Kc * c / CS, p.Kc * (c + 1) / CS, lut, acc);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) part[warp][nt][lane] = make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]);
    cluster_sync();
    if (warp % CS == c) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            if (acc_m(nt, 0) >= p.M) continue;
            const u32 addr = smem_u32(&part[warp][nt][lane]);
            float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
            for (int r = 0; r < CS; ++r) {
                const float4 v = ld_cluster(addr, r);
                s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
            }
            acc[nt][0] = s.x, acc[nt][1] = s.y, acc[nt][2] = s.z, acc[nt][3] = s.w;
        }
        store_y<NT>(YOut{p.y, p.alpha, p.M, p.N}, tile, acc);
    }
    cluster_sync();
}

// same parameters as gemv.cu's kernels (ws and counters unused); U as there
#define GEMV_PARAMS const uint4* wq, const u16* wsc, const u16* x, u16* y, float* ws, int* counters, \
                    const float* alpha, int M, int N, int K, int Np, int Kc
#define GEMV_ARGS GemvArgs{wq, wsc, x, y, ws, counters, alpha, M, N, K, Np, Kc}
#define CLUSTER_KERNEL(CS, NT, U)                                                                   \
    extern "C" __global__ void __cluster_dims__(CS, 1, 1) __launch_bounds__(256, 2)                \
        nvfp4_gemv_cl##CS##_nt##NT(GEMV_PARAMS) { gemv_cluster_body<NT, U, CS>(GEMV_ARGS); }
#define CLUSTER_KERNELS(CS) CLUSTER_KERNEL(CS, 1, 3) CLUSTER_KERNEL(CS, 2, 2) CLUSTER_KERNEL(CS, 4, 1)
CLUSTER_KERNELS(1)
CLUSTER_KERNELS(2)
CLUSTER_KERNELS(3)
CLUSTER_KERNELS(4)
CLUSTER_KERNELS(5)
CLUSTER_KERNELS(6)
CLUSTER_KERNELS(7)
CLUSTER_KERNELS(8)
