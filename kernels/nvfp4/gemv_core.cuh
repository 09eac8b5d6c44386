// gemv_core.cuh: the split-K GEMV's per-warp segment (loads, decode, MMA) and y store, shared by gemv.cu (persistent
// grid, global split-K flush) and gemv_cluster.cu (thread-block clusters, reduction through distributed shared
// memory). Layouts: common.cuh and gemv.cu's header.
#pragma once
#include "common.cuh"

struct GemvArgs {
    const uint4* wq;     // [Np/16, Kc, 32] fragments
    const u16* wsc;      // [Np/16, Kc, 32] scale pairs (low byte row g, high byte row g+8)
    const u16* x;        // [M, K] bf16
    u16* y;              // [M, N] bf16
    float* ws;           // v7: [Np/16, NT, 32] float4; *_atomic: [32, Np] f32; zero between calls
    int* counters;       // [Np/128], zero between calls
    const float* alpha;  // [Np/16] gmul * 2^62 per 16-row tile (fused shards may differ)
    int M, N, K, Np, Kc;
    const u16* x_up;     // gemv_bt's _silu entries: x is silu(x) * x_up ([1, K] bf16, kernels/norm silu_mul);
                         // _gnorm entries: the gate z of the gated RMSNorm (weight norm_w [128], eps)
    // gemv_bt's _norm entries: x is RMSNorm(x + x_res) with weight norm_w [K], eps; block 0 writes the sum h_out and
    // the normalised y_out ([1, K] bf16 each, kernels/norm norm_rms_zc with a residual)
    const u16* x_res;
    const u16* norm_w;
    u16* h_out;
    u16* y_out;
    float eps;
};

// MODE: 0 normal; timing diagnostics for the bench (wrong results): 1 skips the split-K flush, 2 skips the decode and
// MMA (loads only); 3 = normal but weights loaded through L1 (ld.global.nc) instead of L1::no_allocate
// 4 = v2's scalar-atomic flush (bench comparison)
enum { MODE_NORMAL = 0, MODE_NOFLUSH = 1, MODE_LOADONLY = 2, MODE_L1 = 3, MODE_ATOMIC = 4 };

// U chunks of one warp in flight: weight fragments, scale pairs, x (B) fragments (XS: x is read from shared memory
// when used, so it holds no registers between load and use: more chunks fit in flight)
template <int NT, int U, bool XS = false>
struct Group {
    uint4 w[U];
    u32 s[U];
    uint4 xv[XS ? 1 : U][NT][2];
};

// XS: x [M, K] -> shared xs [M, Kc * 64] bf16 (zero past K) by 16-byte cp.async (common.cuh), all threads; the
// caller waits (cp_async_wait_all + __syncthreads) before the first use. K % 8 == 0.
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
}
__device__ __forceinline__ void stage_x(const GemvArgs& p, uint4* xs) {
    const int per_row = p.Kc * 8;  // 16-byte pieces
    for (int i = threadIdx.x; i < p.M * per_row; i += blockDim.x) {
        const int m = i / per_row, k = (i - m * per_row) * 8;
        cp_async16(xs + i, p.x + (u64)m * p.K + min(k, p.K - 8), k < p.K);
    }
}

// Lane (g, t) loads x row min(8 nt + g, M - 1) (rows past M duplicate row M - 1: their MMA columns are never
// stored, so no lane needs zeros or a predicate) at k = min(64 cc + 16 t, K - 16) (past K the weights are zero
// codes with zero scales, and x stays in bounds; K % 8 == 0, K >= 16). xl: x + (that row) * K + 16 t.
// PART: 0 weights, scales and x; 1 weights and scales only; 2 x only (the early first loads of gemv_segment)
template <int NT, int U, int MODE, bool XS, int PART = 0>
__device__ __forceinline__ void load_group(const GemvArgs& p, const uint4* wp, const u16* sp,
                                           const u16* const (&xl)[NT], int kmax, int c, int cb,
                                           Group<NT, U, XS>& grp) {
    const uint4* wg = wp + (u64)c * 32;
    const u16* sg = sp + (u64)c * 32;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        if (c + u >= cb) break;
        if (PART != 2) {
            grp.w[u] = MODE == MODE_L1 ? ld_nc16(wg + u * 32) : ld_stream16(wg + u * 32);
            grp.s[u] = ld_stream_u16(sg + u * 32);
        }
        if (XS || PART == 1) continue;
        const int k = min((c + u) * 64, kmax);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            grp.xv[XS ? 0 : u][nt][0] = ld_nc16(xl[nt] + k);
            grp.xv[XS ? 0 : u][nt][1] = ld_nc16(xl[nt] + k + 8);
        }
    }
}

// S = 4 / NT independent accumulator sets (k-step st -> set st % S) keep the dependent HMMA chains short.
// XS: x from shared memory, xsl[nt] = this lane's row of it + 2 t (uint4 units), chunk c at + 8 c.
template <int NT, int U, int S, int MODE, bool XS>
__device__ __forceinline__ void compute_group(const Group<NT, U, XS>& grp, int c, int cb, const u32* lut,
                                              const uint4* const (&xsl)[NT], float (&acc)[S][NT][4]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        if (c + u >= cb) break;
        uint4 xv[NT][2];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int h = 0; h < 2; ++h) xv[nt][h] = XS ? xsl[nt][(c + u) * 8 + h] : grp.xv[XS ? 0 : u][nt][h];
        if (MODE == MODE_LOADONLY) {
            const u32 v = grp.w[u].x ^ grp.w[u].y ^ grp.w[u].z ^ grp.w[u].w ^ grp.s[u] ^ xv[0][0].x;
            acc[0][0][0] += __uint_as_float(v & 0x3F800000u);
            continue;
        }
        const u32 sg = lut[grp.s[u] & 0xFFu], sg8 = lut[grp.s[u] >> 8];
#pragma unroll
        for (int st = 0; st < 4; ++st) {
            u32 a[4];
            decode_word(word_of(grp.w[u], st), sg, sg8, a);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const uint4& b = xv[nt][st >> 1];
                mma_bf16(acc[st % S][nt], a, (st & 1) ? b.z : b.x, (st & 1) ? b.w : b.y);
            }
        }
    }
}

// out = the sum of the S accumulator sets, which are zeroed (ready for the next segment)
template <int NT, int S>
__device__ __forceinline__ void sum_sets(float (&acc)[S][NT][4], float (&out)[NT][4]) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float v = 0.0f;
#pragma unroll
            for (int j = 0; j < S; ++j) v += acc[j][nt][i], acc[j][nt][i] = 0.0f;
            out[nt][i] = v;
        }
}

// two half-buffers of U chunks: the loads of one are in flight while the other is decoded and multiplied.
// XS: xs = x staged in shared memory (stage_x); wait_x: the block's first segment, which waits for it (after
// issuing its first weight loads, so the two overlap). EARLY (with wait_x): the first two groups' weights are loaded
// before griddepcontrol.wait (they need nothing from the kernel before), x after it (XS: staged here).
template <int NT, int U, int MODE, bool XS = false, bool EARLY = false>
__device__ __forceinline__ void gemv_segment(const GemvArgs& p, int tile, int ca, int cb, const u32* lut,
                                             float (&out)[NT][4], const uint4* xs = nullptr, bool wait_x = false) {
    constexpr int S = 4 / NT;
    const int lane = threadIdx.x & 31;
    const uint4* wp = p.wq + (u64)tile * p.Kc * 32 + lane;
    const u16* sp = p.wsc + (u64)tile * p.Kc * 32 + lane;
    float acc[S][NT][4];
#pragma unroll
    for (int j = 0; j < S; ++j)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) acc[j][nt][0] = acc[j][nt][1] = acc[j][nt][2] = acc[j][nt][3] = 0.0f;
    const int g = lane >> 2, t = lane & 3, kmax = p.K - 16 - 16 * t;
    const u16* xl[NT];
    const uint4* xsl[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        const int m = min(nt * 8 + g, p.M - 1);
        xl[nt] = p.x + (u64)m * p.K + 16 * t;
        xsl[nt] = xs + m * p.Kc * 8 + 2 * t;
    }
    Group<NT, U, XS> g0, g1;
    if (EARLY && wait_x) {
        load_group<NT, U, MODE, XS, 1>(p, wp, sp, xl, kmax, ca, cb, g0);
        load_group<NT, U, MODE, XS, 1>(p, wp, sp, xl, kmax, ca + U, cb, g1);
        pdl_wait();
        if (XS) stage_x(p, (uint4*)xs);
        load_group<NT, U, MODE, XS, 2>(p, wp, sp, xl, kmax, ca, cb, g0);
        load_group<NT, U, MODE, XS, 2>(p, wp, sp, xl, kmax, ca + U, cb, g1);
    } else {
        load_group<NT, U, MODE>(p, wp, sp, xl, kmax, ca, cb, g0);
        load_group<NT, U, MODE>(p, wp, sp, xl, kmax, ca + U, cb, g1);
    }
    if (XS && wait_x) {
        cp_async_wait_all();
        __syncthreads();
    }
    for (int c = ca; c < cb; c += 2 * U) {
        compute_group<NT, U, S, MODE>(g0, c, cb, lut, xsl, acc);
        load_group<NT, U, MODE>(p, wp, sp, xl, kmax, c + 2 * U, cb, g0);
        compute_group<NT, U, S, MODE>(g1, c + U, cb, lut, xsl, acc);
        load_group<NT, U, MODE>(p, wp, sp, xl, kmax, c + 3 * U, cb, g1);
    }
    sum_sets<NT, S>(acc, out);
}

// lane's accumulator element i of n8 tile nt -> (m, n) of y
__device__ __forceinline__ int acc_m(int nt, int i) { return nt * 8 + 2 * (threadIdx.x & 3) + (i & 1); }
__device__ __forceinline__ int acc_n(int tile, int i) { return tile * 16 + ((threadIdx.x & 31) >> 2) + (i >> 1) * 8; }

// y rows of this lane's accumulators for 16-row tile `tile`, scaled by alpha[tile]
struct YOut {
    u16* y;
    const float* alpha;
    int M, N;
};

template <int NT>
__device__ __forceinline__ void store_y(const YOut& o, int tile, const float (&acc)[NT][4]) {
    const float al = o.alpha[tile];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int m = acc_m(nt, i), n = acc_n(tile, i);
            if (m < o.M && n < o.N) o.y[(u64)m * o.N + n] = f32_to_bf16(acc[nt][i] * al);
        }
}

