// gemv_split.cuh: the split-K flush of a partial row-group segment (gemv.cu's v7 and v2 flushes), shared by gemv.cu
// and gemv_bulk.cu. Workspace and counter layouts: gemv.cu's header.
#pragma once
#include "gemv_core.cuh"

// after this block's partial sums are issued: the barrier orders every thread's reductions before thread 0's
// (cumulative) fence and counter bump. True in the block whose chunks complete row group rg (acquire fence taken).
__device__ __forceinline__ bool completes_row_group(const GemvArgs& p, int rg, int nchunks, int* s_last) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        *s_last = atomicAdd(p.counters + rg, nchunks) + nchunks == p.Kc;
    }
    __syncthreads();
    if (!*s_last) return false;
    __threadfence();
    return true;
}

// v2's flush (MODE_ATOMIC) of a partial segment: red.add into the zeroed workspace, the finishing block reads back
// with atomicExch
template <int NT>
__device__ void flush_atomic(const GemvArgs& p, int rg, int nchunks, const float (&acc)[NT][4], int* s_last) {
    const int tile = rg * 8 + (threadIdx.x >> 5);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int m = acc_m(nt, i);
            if (m < p.M) atomicAdd(p.ws + (u64)m * p.Np + acc_n(tile, i), acc[nt][i]);
        }
    if (!completes_row_group(p, rg, nchunks, s_last)) return;
    for (int i = threadIdx.x; i < 128 * p.M; i += blockDim.x) {
        const int m = i >> 7, n = rg * 128 + (i & 127);
        const float v = atomicExch(p.ws + (u64)m * p.Np + n, 0.0f);
        if (n < p.N) p.y[(u64)m * p.N + n] = f32_to_bf16(v * p.alpha[n >> 4]);
    }
    if (threadIdx.x == 0) p.counters[rg] = 0;
}

__device__ __forceinline__ void red_add_v4(float4* p, const float (&v)[4]) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
                 : "memory");
}

// v7 flush of a partial segment of nchunks chunks of row group rg: see the header
template <int NT>
__device__ void gemv_flush(const GemvArgs& p, int rg, int nchunks, float (&acc)[NT][4], int* s_last) {
    const int tile = rg * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    float4* ws = (float4*)p.ws + (u64)tile * NT * 32 + lane;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
        if (acc_m(nt, 0) < p.M) red_add_v4(ws + nt * 32, acc[nt]);
    if (!completes_row_group(p, rg, nchunks, s_last)) return;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        if (acc_m(nt, 0) >= p.M) continue;
        const float4 v = __ldcg(ws + nt * 32);
        __stcg(ws + nt * 32, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
        acc[nt][0] = v.x, acc[nt][1] = v.y, acc[nt][2] = v.z, acc[nt][3] = v.w;
    }
    store_y<NT>(YOut{p.y, p.alpha, p.M, p.N}, tile, acc);
    if (threadIdx.x == 0) p.counters[rg] = 0;
}

