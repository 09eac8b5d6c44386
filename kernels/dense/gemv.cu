// Skinny bf16 GEMV for dense (unquantized) Linears at decode: y[m, n] = sum_k x[m, k] * w[n, k], m < M <= 8.
//
// Why: NVFP4 recipes keep some small projections in bf16 (the GDN gates in_proj_b / in_proj_a: [2 * 48, 5120] on
// the 27B shape). cuBLAS runs each such call as a split-K GEMM plus a reduce kernel, ~7 us a call at M = 1 on the
// H200 (bench/serve_profile.py, 2026-11-30), where the 0.98 MB of weights stream in ~0.3 us.
//
// Grid: one block of THREADS (128) threads per output column n (a weight row). Thread t owns the 16-byte weight
// vectors v = t, t + 128, ... (8 bf16 each, at most VPT = 8 of them: K <= 8192) and loads all of them before
// griddepcontrol.wait (programmatic dependent launch: the weights are written by no kernel, x is written by the
// kernel before), then reads the same vectors of each x row, f32 FMA, a warp shuffle and a shared-memory sum over
// the 4 warps; thread m < M writes y[m, n] rounded to bf16. Summation order: per thread over its vectors, then the
// lanes by xor-shuffle, then warps 0..3 (deterministic, not cuBLAS's). Requires K % 8 == 0, 16-byte aligned rows.
#include <cuda_bf16.h>

#define THREADS 128
#define VPT 8
#define MAX_M 8

__device__ __forceinline__ uint4 ld_weight16(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ float dot8(uint4 a, uint4 b, float acc) {
    const unsigned int aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float2 af = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&aw[i]));
        float2 bf = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bw[i]));
        acc = fmaf(af.x, bf.x, acc);
        acc = fmaf(af.y, bf.y, acc);
    }
    return acc;
}

extern "C" __global__ void __launch_bounds__(THREADS) gemv_bf16_rows(
    const __nv_bfloat16* __restrict__ w, long long w_stride, const __nv_bfloat16* __restrict__ x,
    long long x_stride, __nv_bfloat16* __restrict__ y, long long y_stride, int M, int K) {
    const int n = blockIdx.x, t = threadIdx.x, vecs = K >> 3;
    const uint4* wr = reinterpret_cast<const uint4*>(w + (long long)n * w_stride);
    uint4 wv[VPT];
#pragma unroll
    for (int i = 0; i < VPT; ++i)
        if (t + i * THREADS < vecs) wv[i] = ld_weight16(wr + t + i * THREADS);
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    float acc[MAX_M];
#pragma unroll
    for (int m = 0; m < MAX_M; ++m) {
        acc[m] = 0.f;
        if (m < M) {
            const uint4* xr = reinterpret_cast<const uint4*>(x + (long long)m * x_stride);
#pragma unroll
            for (int i = 0; i < VPT; ++i)
                if (t + i * THREADS < vecs) acc[m] = dot8(wv[i], xr[t + i * THREADS], acc[m]);
        }
    }
    __shared__ float part[THREADS / 32][MAX_M];
#pragma unroll
    for (int m = 0; m < MAX_M; ++m) {
        float s = acc[m];
#pragma unroll
        for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if ((t & 31) == 0) part[t >> 5][m] = s;
    }
    __syncthreads();
    if (t < M) {
        float s = 0.f;
#pragma unroll
        for (int j = 0; j < THREADS / 32; ++j) s += part[j][t];
        y[(long long)t * y_stride + n] = __float2bfloat16_rn(s);
    }
}
