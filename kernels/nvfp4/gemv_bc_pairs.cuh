// gemv_bc_pairs.cuh: the block-column M = 1 GEMV's per-warp work (x staged as x * 2^100, groups of U chunk pairs
// loaded into registers, their decode + MMA + block-scale multiply, one tile's segment of pairs), shared by
// gemv_bc.cu (v10: split-K over a persistent grid) and gemv_bt.cu (v12: whole tiles per block). Method and
// layouts: gemv_bc.cu's header.
#pragma once
#include "gemv_bc_common.cuh"
#include "gemv_bt_stage.cuh"

// U chunk pairs of one warp in flight: two fragments and one scale word per pair
template <int U>
struct PairGroup {
    uint4 w[U][2];
    u32 s[U];
};

template <int U>
__device__ __forceinline__ void load_pairs(const GemvArgs& p, const uint4* wp, const u32* sp, int q, int qb,
                                           PairGroup<U>& grp) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        if (q + u >= qb) break;
        const int c = 2 * (q + u);
        grp.w[u][0] = ld_stream16(wp + (u64)c * 32);
        grp.w[u][1] = c + 1 < p.Kc ? ld_stream16(wp + (u64)(c + 1) * 32) : make_uint4(0u, 0u, 0u, 0u);
        grp.s[u] = ld_stream_u32(sp + (u64)(q + u) * 32);
    }
}

// xb[h]: shared address of this lane's B source for chunk parity h at pair 0 (x or the zero pieces), advancing
// step[h] bytes per pair
template <int U, int MODE>
__device__ __forceinline__ void compute_pairs(const PairGroup<U>& grp, int q, int qb, const u32 (&xb)[2],
                                              const u32 (&step)[2], float& sum_g, float& sum_g8) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        if (q + u >= qb) break;
        float c[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const u32 xa = xb[h] + (u32)(q + u) * step[h];
            const uint4 b[2] = {lds16(xa), lds16(xa + 16)};
            if (MODE == MODE_LOADONLY) {
                const uint4& w = grp.w[u][h];
                c[h][0] = c[h][1] = c[h][2] = c[h][3] = 0.0f;
                c[0][0] += __uint_as_float((w.x ^ w.y ^ w.z ^ w.w ^ grp.s[u] ^ b[0].x) & 0x3F800000u);
                continue;
            }
#pragma unroll
            for (int st = 0; st < 4; ++st) {
                u32 a[4];
                decode_word_raw(word_of(grp.w[u][h], st), a);
                const uint4& bb = b[st >> 1];
                if (h == 0 && st < 2)
                    mma_bf16_first(c[st & 1], a, (st & 1) ? bb.z : bb.x, (st & 1) ? bb.w : bb.y);
                else
                    mma_bf16(c[st & 1], a, (st & 1) ? bb.z : bb.x, (st & 1) ? bb.w : bb.y);
            }
        }
        const float2 s01 = e4m3x2_to_float2(grp.s[u]), s23 = e4m3x2_to_float2(grp.s[u] >> 16);
        sum_g = fmaf(c[0][0] + c[1][0], s01.x, sum_g);
        sum_g = fmaf(c[0][1] + c[1][1], s01.y, sum_g);
        sum_g8 = fmaf(c[0][2] + c[1][2], s23.x, sum_g8);
        sum_g8 = fmaf(c[0][3] + c[1][3], s23.y, sum_g8);
    }
}

// pairs [qa, qb) of 16-row tile `tile` -> out (store_y / gemv_flush layout: lane t = 0 holds rows g, g + 8 in
// out[0][0], out[0][2]). first: the block's first segment stages x after issuing its first weight loads (XS:
// gemv_bt_stage.cuh's modes).
template <int U, int MODE, int XS = XS_PLAIN>
__device__ __forceinline__ void pair_segment(const GemvArgs& p, int tile, int qa, int qb, uint4* xs, bool first,
                                             float (&out)[1][4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, kp = (p.Kc + 1) >> 1;
    const uint4* wp = p.wq + (u64)tile * p.Kc * 32 + lane;
    const u32* sp = (const u32*)p.wsc + (u64)tile * kp * 32 + lane;
    PairGroup<U> g0, g1;
    load_pairs<U>(p, wp, sp, qa, qb, g0);
    load_pairs<U>(p, wp, sp, qa + U, qb, g1);
    if (first) {  // the weight loads above need nothing from earlier kernels; x and every global write do
        pdl_wait();
        stage_x_mode<XS>(p, xs, kp, blockDim.x);
        __syncthreads();
    }
    u32 x0;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(x0) : "l"(xs));
    const u32 zero = x0 + kp * 256;  // 16-byte pieces: 16 per pair
    const u32 xb[2] = {g == t ? x0 + 32 * t : zero, g == t + 4 ? x0 + 128 + 32 * t : zero};
    const u32 step[2] = {g == t ? 256u : 0u, g == t + 4 ? 256u : 0u};
    float sum_g = 0.0f, sum_g8 = 0.0f;
    for (int q = qa; q < qb; q += 2 * U) {
        compute_pairs<U, MODE>(g0, q, qb, xb, step, sum_g, sum_g8);
        load_pairs<U>(p, wp, sp, q + 2 * U, qb, g0);
        compute_pairs<U, MODE>(g1, q + U, qb, xb, step, sum_g, sum_g8);
        load_pairs<U>(p, wp, sp, q + 3 * U, qb, g1);
    }
    sum_g += __shfl_xor_sync(0xFFFFFFFFu, sum_g, 1);
    sum_g8 += __shfl_xor_sync(0xFFFFFFFFu, sum_g8, 1);
    sum_g += __shfl_xor_sync(0xFFFFFFFFu, sum_g, 2);
    sum_g8 += __shfl_xor_sync(0xFFFFFFFFu, sum_g8, 2);
    out[0][0] = sum_g, out[0][1] = 0.0f, out[0][2] = sum_g8, out[0][3] = 0.0f;
}
