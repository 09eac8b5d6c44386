// gemm_stream_k.cuh (included by gemm_wgmma.cu after its main loop): the stream-K GEMM kernels (_skm).
#pragma once

__device__ __forceinline__ void st_release(int* p, int v) {
    asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ int ld_acquire(const int* p) {
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}


// A piece that does not hold its tile's chunk 0 (the _skm kernels' and gemm_ws_sk.cuh's): its sums to ws[block]
// ([T / 8][256 MMA threads] float4, 8-token groups past tokens_left skipped), then flags[block] = 1 (released after
// every MMA thread's stores: WS, the warp-specialised kernels' named barrier of those 256 threads)
template <int T, bool WS>
__device__ __forceinline__ void sk_store_piece(const float (&acc)[T / 2], float* ws, int* flags, int tokens_left) {
    float4* mine = (float4*)ws + (u64)blockIdx.x * (T / 8) * THREADS + threadIdx.x;
#pragma unroll
    for (int j = 0; j < T / 8; ++j)
        if (8 * j < tokens_left) __stcg(mine + j * THREADS, make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2],
                                                                         acc[4 * j + 3]));
    mma_threads_sync<WS>();  // every thread's sums before thread 0's (cumulative) release
    if (threadIdx.x == 0) st_release(flags + blockIdx.x, 1);
}

// The finisher (holds the tile's chunk 0): waits for the flags of blocks blockIdx.x + 1 .. last (the tile's other
// pieces), clears them (zero between launches) and adds their sums into acc
template <int T, bool WS>
__device__ __forceinline__ void sk_add_pieces(float (&acc)[T / 2], const float* ws, int* flags, int last,
                                              int tokens_left) {
    for (int b = blockIdx.x + 1; b <= last; ++b) {
        if (threadIdx.x == 0) {
            while (ld_acquire(flags + b) == 0) {
            }
            flags[b] = 0;
        }
        mma_threads_sync<WS>();
        const float4* theirs = (const float4*)ws + (u64)b * (T / 8) * THREADS + threadIdx.x;
#pragma unroll
        for (int j = 0; j < T / 8; ++j) {
            if (8 * j >= tokens_left) continue;
            const float4 v = __ldcg(theirs + j * THREADS);
            acc[4 * j] += v.x, acc[4 * j + 1] += v.y, acc[4 * j + 2] += v.z, acc[4 * j + 3] += v.w;
        }
    }
}


// Stream-K (the _skm kernels; gemm_wgmma.py launches G = one block per SM). A finisher spins until the few blocks
// after it in dispatch order have stored their pieces (the first thing each does), so those must become resident
// while it waits: true with the GPU to ourselves (G blocks on G SMs), not on a GPU shared down to a handful of SMs. Tiles [0, dp) (dp a multiple of G) go whole, round-robin:
// block b takes b, b + G, ... Then the chunk iterations (tile - dp) Kc + c of the remaining tiles are cut into G
// ranges of L = ceil(iterations / G), block b's [b L, (b + 1) L). Only a block's first piece can start inside a
// tile; such a piece's sums go to ws[b] ([T / 8][256 threads] float4, 8-token groups past M skipped) and flags[b]
// becomes 1. The block holding a tile's chunk 0 (its last piece) finishes the tile: it waits for the flags of the
// blocks after it up to the tile's last chunk, adds their sums, clears the flags (zero between launches) and writes.
template <int T, int S>
__device__ __forceinline__ void gemm_stream_k(const unsigned char* wq, const unsigned char* wsc, const u16* x, u16* y,
                                              const float* alpha, int M, int N, int K, int Kc, int R, int group,
                                              int vec_out, float* ws, int* flags, int dp) {
    extern __shared__ unsigned char dsmem[];
    __shared__ u32 lut[256];
    lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    const u32 raw = smem_u32(dsmem), base = (raw + 1023u) & ~1023u;
    u16* ot = (u16*)(dsmem + (base - raw));
    float acc[T / 2];
    for (int tile = blockIdx.x; tile < dp; tile += gridDim.x) {
        const int2 o = tile_origin(tile, M, T, R, group);
        mainloop<T, S, true, true, 0>(acc, make_src<true>(wq, wsc, x, M, K, Kc, o.x, o.y, 0), Kc, base, lut);
        epilogue<T>(acc, ot, y, alpha, o.x, o.y, M, N, vec_out);
        __syncthreads();  // the epilogue's reads of the stage ring before the next tile's copies into it
    }
    const long long iters = (long long)(R * ((M + T - 1) / T) - dp) * Kc, L = (iters + gridDim.x - 1) / gridDim.x;
    long long it = blockIdx.x * L;
    const long long end = min(it + L, iters);
    while (it < end) {
        const int u = (int)(it / Kc), c0 = (int)(it - (long long)u * Kc), nc = (int)min(end - it, (long long)(Kc - c0));
        const int2 o = tile_origin(dp + u, M, T, R, group);
        mainloop<T, S, true, true, 0>(acc, make_src<true>(wq, wsc, x, M, K, Kc, o.x, o.y, c0), nc, base, lut);
        it += nc;
        if (c0 > 0) {  // not the tile's chunk 0: the sums go to the finisher
            sk_store_piece<T, false>(acc, ws, flags, M - o.y);
            continue;
        }
        sk_add_pieces<T, false>(acc, ws, flags, (int)(((long long)(u + 1) * Kc - 1) / L), M - o.y);
        epilogue<T>(acc, ot, y, alpha, o.x, o.y, M, N, vec_out);
        __syncthreads();
    }
}

// stream-K (x pre-permuted, fenced): ws, flags as gemm_stream_k; dp = tiles done whole first
#define SKM_KERNEL(name, t, s) \
    extern "C" __global__ void __launch_bounds__(THREADS, 1) name(GEMM_ARGS, int dp) { \
        gemm_stream_k<t, s>(wq, wsc, x, y, alpha, M, N, K, Kc, R, group, vec_out, ws, counters, dp); \
    }
SKM_KERNEL(nvfp4_gemm_wgmma_t128_skm, 128, 6)
SKM_KERNEL(nvfp4_gemm_wgmma_t256_skm, 256, 5)
