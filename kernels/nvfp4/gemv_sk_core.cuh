// v13's pieces (gemv_sk.cu: method and entries): the kernels' arguments, x staged in shared memory or read
// through L1, one chunk's decode + mma.sync, the per-warp register ring and a segment's loop, x row pointers.
#pragma once
#include "gemv_core.cuh"

#define SK_THREADS 512

struct SkArgs {
    const uint4* wq;     // [Np/16, Kc, 32] fragments
    const u16* wsc;      // [Np/16, Kc, 32] scale pairs
    const u16* x;        // [M, K] bf16
    u16* y;              // [M, N] bf16
    float* ws;           // [Np/64, 128, NT * 4] f32, zero between calls
    int* counters;       // [Np/64], zero between calls
    const float* alpha;  // [Np/16]
    int M, N, K, Np, Kc;
};

// x [M, K] -> rows of Kc * 128 + PAD bytes at xs (zero past K) by every thread of the block: 16-byte cp.async
// (PAD 16: the lanes' 16-byte reads of one row group hit distinct banks) or 8-byte (PAD 8: the same for 8-byte reads)
template <int PAD>
__device__ __forceinline__ void sk_stage_x(const SkArgs& p, unsigned char* xs) {
    const int per_row = p.Kc * (128 / PAD), pitch = p.Kc * 128 + PAD, e = PAD / 2;
    for (int i = threadIdx.x; i < p.M * per_row; i += blockDim.x) {
        const int m = i / per_row, u = i - m * per_row, k = u * e;
        const u16* src = p.x + (u64)m * p.K + min(k, p.K - e);
        unsigned char* dst = xs + m * pitch + u * PAD;
        if constexpr (PAD == 16)
            cp_async16(dst, src, k < p.K);
        else
            asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" :: "r"(smem_u32(dst)), "l"(src),
                         "r"(k < p.K ? 8 : 0));
    }
}

// one chunk c: decode the fragment (4 k-steps) and multiply by the lane's x words (xr: its row + 32 t bytes). XJ:
// each k-step's two words read just before its MMA (8 bytes); else the chunk's 8 words up front (2 x 16 bytes); XG:
// x read from global memory (through L1), not staged; xmax: the last byte offset a lane may read there
template <int NT, bool XJ, bool XG = false>
__device__ __forceinline__ void sk_chunk(uint4 f, u32 sc, const u32* lut, const unsigned char* const (&xr)[NT],
                                         int c, int xmax, float (&acc)[NT][4]) {
    uint4 xv[NT][2];
    if constexpr (XG) {  // past K (zero weight codes and scales there) the lane re-reads x's last 16 values
        const int o = min(128 * c, xmax);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
            xv[nt][0] = __ldg((const uint4*)(xr[nt] + o)), xv[nt][1] = __ldg((const uint4*)(xr[nt] + o + 16));
    } else if constexpr (!XJ) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
            xv[nt][0] = *(const uint4*)(xr[nt] + 128 * c), xv[nt][1] = *(const uint4*)(xr[nt] + 128 * c + 16);
    }
    const u32 sg = lut[sc & 0xFFu], sg8 = lut[sc >> 8];
#pragma unroll
    for (int st = 0; st < 4; ++st) {
        u32 a[4];
        decode_word(word_of(f, st), sg, sg8, a);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            if constexpr (XJ) {
                const uint2 b = *(const uint2*)(xr[nt] + 128 * c + 8 * st);
                mma_bf16(acc[nt], a, b.x, b.y);
            } else {
                const uint4& b = xv[nt][st >> 1];
                mma_bf16(acc[nt], a, (st & 1) ? b.z : b.x, (st & 1) ? b.w : b.y);
            }
        }
    }
}

// the U-chunk register ring of one warp's segment: fragments and scale pairs of chunks c .. c + U - 1
template <int U>
struct SkRing {
    uint4 w[U];
    u32 s[U];
};

// ring slot u <- chunk c of the lane's fragments and scale pairs (base: its tile's chunk 0)
template <int U>
__device__ __forceinline__ void sk_fetch(const SkArgs& p, u64 base, int c, int u, SkRing<U>& r) {
    r.w[u] = ld_stream16(p.wq + base + (u64)c * 32);
    r.s[u] = ld_stream_u16(p.wsc + base + (u64)c * 32);
}

template <int U>
__device__ __forceinline__ void sk_load(const SkArgs& p, int tile, int ca, int cb, SkRing<U>& r) {
    const u64 base = (u64)tile * p.Kc * 32 + (threadIdx.x & 31);
#pragma unroll
    for (int u = 0; u < U; ++u)
        if (ca + u < cb) sk_fetch<U>(p, base, ca + u, u, r);
}

// acc = tile's sums over chunks [ca, cb); r holds chunks ca .. ca + U - 1 on entry. SPLIT: ring slots of odd u add
// into a second set of sums (two independent mma.sync chains a warp), added at the end (session 25)
template <int NT, int U, bool XJ, bool XG = false, bool SPLIT = false>
__device__ __forceinline__ void sk_segment(const SkArgs& p, int tile, int ca, int cb, const u32* lut,
                                           const unsigned char* const (&xr)[NT], SkRing<U>& r, float (&acc)[NT][4]) {
    const int xmax = 2 * p.K - 32 - 32 * (threadIdx.x & 3);
    const u64 base = (u64)tile * p.Kc * 32 + (threadIdx.x & 31);
    float sums[SPLIT ? 2 : 1][NT][4];
#pragma unroll
    for (int h = 0; h < (SPLIT ? 2 : 1); ++h)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) sums[h][nt][0] = sums[h][nt][1] = sums[h][nt][2] = sums[h][nt][3] = 0.0f;
    int c = ca;
    for (; c + U <= cb; c += U) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const uint4 f = r.w[u];
            const u32 sc = r.s[u];
            if (c + u + U < cb) sk_fetch<U>(p, base, c + u + U, u, r);
            sk_chunk<NT, XJ, XG>(f, sc, lut, xr, c + u, xmax, sums[SPLIT ? (u & 1) : 0]);
        }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
        if (c + u < cb) sk_chunk<NT, XJ, XG>(r.w[u], r.s[u], lut, xr, c + u, xmax, sums[SPLIT ? (u & 1) : 0]);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nt][e] = SPLIT ? sums[0][nt][e] + sums[SPLIT ? 1 : 0][nt][e] : sums[0][nt][e];
}

// the lane's x row pointers (rows past M repeat row M - 1: their columns are never stored)
template <int NT, int PAD>
__device__ __forceinline__ void sk_rows(const SkArgs& p, const unsigned char* xs, const unsigned char* (&xr)[NT]) {
    const int lane = threadIdx.x & 31, pitch = p.Kc * 128 + PAD;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) xr[nt] = xs + min(nt * 8 + (lane >> 2), p.M - 1) * pitch + 32 * (lane & 3);
}

// the lane's x row pointers into x itself (global memory; rows past M repeat row M - 1)
template <int NT>
__device__ __forceinline__ void sk_rows_global(const SkArgs& p, const unsigned char* (&xr)[NT]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
        xr[nt] = (const unsigned char*)(p.x + (u64)min(nt * 8 + (lane >> 2), p.M - 1) * p.K) + 32 * (lane & 3);
}

// after griddepcontrol.wait: the lane's x row pointers, into x itself (XG: read through L1) or into x staged at xs by
// the whole block (PAD as sk_stage_x); a block barrier either way (the e4m3 LUT and a staged x ready)
template <int NT, int PAD, bool XG>
__device__ __forceinline__ void sk_x_ready(const SkArgs& p, unsigned char* xs, const unsigned char* (&xr)[NT]) {
    if constexpr (XG) {
        __syncthreads();
        sk_rows_global<NT>(p, xr);
    } else {
        sk_stage_x<PAD>(p, xs);
        cp_async_wait_all();
        __syncthreads();
        sk_rows<NT, PAD>(p, xs, xr);
    }
}
