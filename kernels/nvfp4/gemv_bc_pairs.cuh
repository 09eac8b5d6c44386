// gemv_bc_pairs.cuh: the block-column M = 1 GEMV's per-warp work (x staged as x * 2^100, groups of U chunk pairs
// loaded into registers, their decode + MMA + block-scale multiply, one tile's segment of pairs), shared by
// gemv_bc.cu (v10: split-K over a persistent grid) and gemv_bt.cu (v12: whole tiles per block). Method and
// layouts: gemv_bc.cu's header.
#pragma once
#include "gemv_bc_common.cuh"

// U chunk pairs of one warp in flight: two fragments and one scale word per pair
template <int U>
struct PairGroup {
    uint4 w[U][2];
    u32 s[U];
};

// x[0, :K] * 2^100 -> xs[0, kp * 128) bf16 (zero past K), then 32 zero bytes (the B fragment of lanes outside a
// chunk's block columns); all threads, plain loads (the caller syncs)
__device__ __forceinline__ void stage_x_scaled(const GemvArgs& p, uint4* xs, int kp) {
    for (int i = threadIdx.x; i < kp * 16 + 2; i += blockDim.x) {
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (i * 8 < p.K) {
            v = ld_nc16(p.x + i * 8);
            v.x = bmul2(v.x, X_SCALE), v.y = bmul2(v.y, X_SCALE), v.z = bmul2(v.z, X_SCALE);
            v.w = bmul2(v.w, X_SCALE);
        }
        xs[i] = v;
    }
}

// bf16(bf16(silu(g)) * u) for two bf16 pairs, as kernels/norm/rmsnorm.cu silu_mul rounds it (silu in f32, x / (1 +
// exp(-x)) as torch; the same compile options, but nvcc may contract expf differently here: last-bit differences)
__device__ __forceinline__ u32 silu_mul_bf16x2(u32 g, u32 u) {
    u32 r = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float gf = __uint_as_float(h ? g & 0xFFFF0000u : g << 16);
        const float uf = __uint_as_float(h ? u & 0xFFFF0000u : u << 16);
        const float s = __uint_as_float((u32)f32_to_bf16(gf / (1.f + expf(-gf))) << 16);
        r |= (u32)f32_to_bf16(s * uf) << (16 * h);
    }
    return r;
}

// stage_x_scaled for x = silu(x) * x_up (the MLP's down projection reading its gate and up halves: no silu_mul launch)
__device__ __forceinline__ void stage_x_silu_scaled(const GemvArgs& p, uint4* xs, int kp) {
    for (int i = threadIdx.x; i < kp * 16 + 2; i += blockDim.x) {
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (i * 8 < p.K) {
            const uint4 g = ld_nc16(p.x + i * 8), u = ld_nc16(p.x_up + i * 8);
            v.x = bmul2(silu_mul_bf16x2(g.x, u.x), X_SCALE), v.y = bmul2(silu_mul_bf16x2(g.y, u.y), X_SCALE);
            v.z = bmul2(silu_mul_bf16x2(g.z, u.z), X_SCALE), v.w = bmul2(silu_mul_bf16x2(g.w, u.w), X_SCALE);
        }
        xs[i] = v;
    }
}

// x staging modes of pair_segment: x itself, silu(x) * x_up, RMSNorm(x + x_res)
#define XS_PLAIN 0
#define XS_SILU 1
#define XS_NORM 2

// bf16(a + b) of 8 bf16 values (two uint4), and the sum of the squares of the rounded values
__device__ __forceinline__ uint4 add8_bf16(const uint4& a, const uint4& b, float& ss) {
    const u32 av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
    u32 r[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const u16 lo = f32_to_bf16(__uint_as_float(av[j] << 16) + __uint_as_float(bv[j] << 16));
        const u16 hi = f32_to_bf16(__uint_as_float(av[j] & 0xFFFF0000u) + __uint_as_float(bv[j] & 0xFFFF0000u));
        const float l = __uint_as_float((u32)lo << 16), h = __uint_as_float((u32)hi << 16);
        ss += l * l;
        ss += h * h;
        r[j] = (u32)lo | ((u32)hi << 16);
    }
    return make_uint4(r[0], r[1], r[2], r[3]);
}

// bf16(h * inv * (1 + w)) of 8 bf16 values (zero-centred RMSNorm weight w)
__device__ __forceinline__ uint4 norm8_bf16(const uint4& h, const uint4& w, float inv) {
    const u32 hv[4] = {h.x, h.y, h.z, h.w}, wv[4] = {w.x, w.y, w.z, w.w};
    u32 r[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const u16 lo = f32_to_bf16(__uint_as_float(hv[j] << 16) * inv * (1.f + __uint_as_float(wv[j] << 16)));
        const u16 hi = f32_to_bf16(__uint_as_float(hv[j] & 0xFFFF0000u) * inv *
                                   (1.f + __uint_as_float(wv[j] & 0xFFFF0000u)));
        r[j] = (u32)lo | ((u32)hi << 16);
    }
    return make_uint4(r[0], r[1], r[2], r[3]);
}

// stage_x_scaled for x = RMSNorm(x + x_res) (the decoder layer's residual add and norm before a projection: no norm
// launch). Rounding as kernels/norm/rmsnorm.cu norm_rms_zc: h = bf16(x + res), y = bf16(h * rsqrt(mean(h^2) + eps)
// * (1 + w)); the sum of squares is added in another order (last-bit differences in inv). Every block computes the
// same y (same order in each); block 0 also writes h_out and y_out. All threads; the caller syncs after.
__device__ __forceinline__ void stage_x_norm_scaled(const GemvArgs& p, uint4* xs, int kp) {
    __shared__ float warp_ss[32];
    const int pieces = p.K / 8, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    const bool writer = blockIdx.x == 0;
    float ss = 0.f;
    for (int i = threadIdx.x; i < kp * 16 + 2; i += blockDim.x) {
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (i < pieces) {
            v = add8_bf16(ld_nc16(p.x + i * 8), ld_nc16(p.x_res + i * 8), ss);
            if (writer) *reinterpret_cast<uint4*>(p.h_out + i * 8) = v;
        }
        xs[i] = v;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) warp_ss[threadIdx.x >> 5] = ss;
    __syncthreads();
    float total = 0.f;
    for (int w = 0; w < warps; ++w) total += warp_ss[w];
    const float inv = rsqrtf(total / (float)p.K + p.eps);
    for (int i = threadIdx.x; i < pieces; i += blockDim.x) {  // the pieces this thread wrote above
        uint4 y = norm8_bf16(xs[i], ld_nc16(p.norm_w + i * 8), inv);
        if (writer) *reinterpret_cast<uint4*>(p.y_out + i * 8) = y;
        y.x = bmul2(y.x, X_SCALE), y.y = bmul2(y.y, X_SCALE), y.z = bmul2(y.z, X_SCALE), y.w = bmul2(y.w, X_SCALE);
        xs[i] = y;
    }
}

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
// out[0][0], out[0][2]). first: the block's first segment stages x after issuing its first weight loads (XS: x
// itself, silu(p.x) * p.x_up or RMSNorm(p.x + p.x_res)).
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
        if (XS == XS_SILU) {
            stage_x_silu_scaled(p, xs, kp);
        } else if (XS == XS_NORM) {
            stage_x_norm_scaled(p, xs, kp);
        } else {
            stage_x_scaled(p, xs, kp);
        }
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
