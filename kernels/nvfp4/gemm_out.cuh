// gemm_out.cuh (included by gemm_wgmma.cu): the output side of its GEMMs and gemm_ws.cuh's: the split-K flush,
// the tile raster and the epilogue. Uses gemm_wgmma.cu's THREADS and PITCH.
#pragma once

// the block's 256 MMA threads meet: the whole block, or (WS: gemm_ws.cuh's warp-specialised kernels, whose producer
// warp takes no part in the split-K flush or the epilogue) named barrier 1 of those 256 threads
template <bool WS>
__device__ __forceinline__ void mma_threads_sync() {
    if constexpr (WS) asm volatile("bar.sync 1, 256;" ::: "memory");
    else __syncthreads();
}

__device__ __forceinline__ void red_add_v4(float4* p, float a, float b, float c, float d) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

// split-K flush of one block (see the header): -> true in the block that completed its tile, acc = the tile's sums.
// Thread i's float4 j of the tile holds acc[4j .. 4j + 3]; groups j with token m0 + 8j >= M are neither added nor
// read (the same in every block of the tile), so only rows below M ever leave the workspace non-zero in between.
template <int T, bool WS = false>
__device__ __forceinline__ bool split_flush(float (&acc)[T / 2], float* ws, int* counters, int tile, int splits,
                                            int tokens_left, int* s_last) {
    float4* w = (float4*)ws + (u64)tile * (T / 8) * THREADS + threadIdx.x;
#pragma unroll
    for (int j = 0; j < T / 8; ++j)
        if (8 * j < tokens_left)
            red_add_v4(w + j * THREADS, acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
    mma_threads_sync<WS>();  // release: every thread's reductions before thread 0's (cumulative) fence and counter bump
    if (threadIdx.x == 0) {
        __threadfence();
        *s_last = atomicAdd(counters + tile, 1) == splits - 1;
    }
    mma_threads_sync<WS>();
    if (!*s_last) return false;
    __threadfence();
#pragma unroll
    for (int j = 0; j < T / 8; ++j) {
        if (8 * j >= tokens_left) continue;
        const float4 v = __ldcg(w + j * THREADS);
        __stcg(w + j * THREADS, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
        acc[4 * j] = v.x, acc[4 * j + 1] = v.y, acc[4 * j + 2] = v.z, acc[4 * j + 3] = v.w;
    }
    if (threadIdx.x == 0) counters[tile] = 0;
    return true;
}

// output tile -> (first weight row tile rb * 8 .. of its 128 rows: rb, first token m0): row tiles rastered in groups
// of `group` (their weights stay in L2 while the group sweeps the tokens)
__device__ __forceinline__ int2 tile_origin(unsigned tile, int M, int T, int R, int group) {
    const int C = (M + T - 1) / T, per_group = group * C, gi = tile / per_group, first = gi * group;
    const int rows_here = min(group, R - first), in = tile - gi * per_group;
    return make_int2(first + in % rows_here, (in / rows_here) * T);
}

// acc (times the 16-row alphas) as bf16 into y rows m0 .., columns rb * 128 .., staged through shared memory `ot`
// (the stage ring, free after mainloop): acc[4j + i] = (weight row 16q + g + 8 (i >> 1) of warpgroup w, token
// 8j + 2t + (i & 1))
template <int T, bool WS = false>
__device__ __forceinline__ void epilogue(const float (&acc)[T / 2], u16* ot, u16* y, const float* alpha, int rb,
                                         int m0, int M, int N, int vec_out) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3, row = (warp >> 2) * 64 + (warp & 3) * 16 + g;
    const float al = alpha[rb * 8 + warp];
#pragma unroll
    for (int j = 0; j < T / 8; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i)
            ot[(8 * j + 2 * t + (i & 1)) * PITCH + row + 8 * (i >> 1)] = f32_to_bf16(acc[4 * j + i] * al);
    mma_threads_sync<WS>();
    const int n0 = rb * 128;
    for (int v = threadIdx.x; v < T * 16; v += THREADS) {
        const int tok = v >> 4, n = n0 + 8 * (v & 15), m = m0 + tok;
        if (m >= M || n >= N) continue;
        const u16* piece = ot + tok * PITCH + 8 * (v & 15);
        if (vec_out && n + 8 <= N) {
            *(uint4*)(y + (u64)m * N + n) = *(const uint4*)piece;
        } else {
            for (int e = 0; e < 8 && n + e < N; ++e) y[(u64)m * N + n + e] = piece[e];
        }
    }
}
