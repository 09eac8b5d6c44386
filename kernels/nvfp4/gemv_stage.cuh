// gemv_stage.cuh: one stage of the bulk-copy GEMV (gemv_bulk.cu, v8): BULK_C chunks of one
// 16-row tile in shared memory (C x 512 B fragments, then C x 64 B scale pairs), decoded and multiplied as
// gemv_core.cuh does; x from shared memory (staged) or global. Layouts: common.cuh.
#pragma once
#include "gemv_core.cuh"

#define BULK_C 4  // chunks per stage
#define BULK_STAGE_BYTES (BULK_C * 576)
// bench diagnostic (wrong results): decode without the MMA, the decoded words folded into one sum
#define MODE_NOMMA 5

// x fragments of chunks [c, c + BULK_C) for this lane (global, through L1; k clamped to K - 16), NT n8 tiles
template <int NT>
__device__ __forceinline__ void load_x(const u16* const (&xl)[NT], int kmax, int c, uint4 (&xv)[BULK_C][NT][2]) {
#pragma unroll
    for (int u = 0; u < BULK_C; ++u) {
        const int k = min((c + u) * 64, kmax);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            xv[u][nt][0] = ld_nc16(xl[nt] + k);
            xv[u][nt][1] = ld_nc16(xl[nt] + k + 8);
        }
    }
}

// decode + MMA of the n chunks of one stage (chunk c first) into acc. All shared-memory reads of the stage are
// issued first (fragments, scale pairs, then their LUT entries, x), so their latencies overlap; slots u >= n feed
// zero fragments (zero products) and x of chunk Kc - 1 (finite), so the loop has no branches.
template <int NT, int MODE, bool XS>
__device__ __forceinline__ void compute_stage(const unsigned char* slot, int c, int n, int Kc, const u32* lut,
                                              const uint4* const (&xsl)[NT], uint4 (&xv)[BULK_C][NT][2],
                                              float (&acc)[4 / NT][NT][4]) {
    const int lane = threadIdx.x & 31;
    uint4 w[BULK_C];
    u32 s[BULK_C];
#pragma unroll
    for (int u = 0; u < BULK_C; ++u) {
        const bool ok = u < n;
        w[u] = ok ? reinterpret_cast<const uint4*>(slot)[u * 32 + lane] : make_uint4(0, 0, 0, 0);
        s[u] = ok ? reinterpret_cast<const u16*>(slot + BULK_C * 512)[u * 32 + lane] : 0u;
    }
    if (MODE == MODE_LOADONLY) {
#pragma unroll
        for (int u = 0; u < BULK_C; ++u) acc[0][0][0] += __uint_as_float((w[u].x ^ w[u].y ^ w[u].z ^ w[u].w ^ s[u]) & 0x3F800000u);
        return;
    }
    u32 sg[BULK_C], sg8[BULK_C];
#pragma unroll
    for (int u = 0; u < BULK_C; ++u) {
        sg[u] = lut[s[u] & 0xFFu], sg8[u] = lut[s[u] >> 8];
        if (XS)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int h = 0; h < 2; ++h) xv[u][nt][h] = xsl[nt][min(c + u, Kc - 1) * 8 + h];
    }
#pragma unroll
    for (int u = 0; u < BULK_C; ++u)
#pragma unroll
        for (int st = 0; st < 4; ++st) {
            u32 a[4];
            decode_word(word_of(w[u], st), sg[u], sg8[u], a);
            if (MODE == MODE_NOMMA) {
                acc[0][0][0] += __uint_as_float((a[0] ^ a[1] ^ a[2] ^ a[3] ^ xv[u][0][0].x) & 0x3F800000u);
                continue;
            }
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const uint4 b = xv[u][nt][st >> 1];
                mma_bf16(acc[st % (4 / NT)][nt], a, (st & 1) ? b.z : b.x, (st & 1) ? b.w : b.y);
            }
        }
}

// per-lane x addresses: global row pointers (xl) and shared-memory rows (xsl), as gemv_core.cuh's gemv_segment
template <int NT>
__device__ __forceinline__ void x_rows(const GemvArgs& p, const uint4* xs, const u16* (&xl)[NT],
                                       const uint4* (&xsl)[NT]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        const int m = min(nt * 8 + g, p.M - 1);
        xl[nt] = p.x + (u64)m * p.K + 16 * t;
        xsl[nt] = xs + m * p.Kc * 8 + 2 * t;
    }
}

