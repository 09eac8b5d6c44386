// gemv_bt_stage.cuh: the block-column M = 1 GEMVs' x staging (x * 2^100 into shared memory, gemv_bc.cu's header),
// plain or with the elementwise / row-wise step before the projection computed on the way (gemv_bt.cu's _silu,
// _norm and _gnorm entries), so that step needs no launch of its own. Each transform rounds as its kernels/norm
// kernel does; sums of squares are added in another order (last-bit differences, tests/kernels/test_nvfp4_bt.py).
#pragma once
#include "gemv_bc_common.cuh"

// x staging modes (pair_segment's XS): x itself, silu(x) * x_up, RMSNorm(x + x_res), the GDN's gated RMSNorm of x
// with the gate x_up
#define XS_PLAIN 0
#define XS_SILU 1
#define XS_NORM 2
#define XS_GNORM 3

__device__ __forceinline__ float bf16_round(float v) { return __uint_as_float((u32)f32_to_bf16(v) << 16); }

// the f32 value of half h (0: the low 16 bits, element 2j; 1: the high, element 2j + 1) of a bf16 pair
__device__ __forceinline__ float bf16_half(u32 w, int h) { return __uint_as_float(h ? w & 0xFFFF0000u : w << 16); }

// x * 2^100 of 8 bf16 values (the staged x's scale, gemv_bc.cu's header)
__device__ __forceinline__ uint4 scale8(uint4 v) {
    v.x = bmul2(v.x, X_SCALE), v.y = bmul2(v.y, X_SCALE), v.z = bmul2(v.z, X_SCALE), v.w = bmul2(v.w, X_SCALE);
    return v;
}

// x[0, :K] * 2^100 -> xs[0, kp * 128) bf16 (zero past K), then 32 zero bytes (the B fragment of lanes outside a
// chunk's block columns); all threads, plain loads (the caller syncs)
__device__ __forceinline__ void stage_x_scaled(const GemvArgs& p, uint4* xs, int kp, int nthreads) {
    for (int i = threadIdx.x; i < kp * 16 + 2; i += nthreads) {
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
        const float gf = bf16_half(g, h), uf = bf16_half(u, h);
        r |= (u32)f32_to_bf16(bf16_round(gf / (1.f + expf(-gf))) * uf) << (16 * h);
    }
    return r;
}

// stage_x_scaled for x = silu(x) * x_up (the MLP's down projection reading its gate and up halves: no silu_mul launch)
__device__ __forceinline__ void stage_x_silu_scaled(const GemvArgs& p, uint4* xs, int kp, int nthreads) {
    for (int i = threadIdx.x; i < kp * 16 + 2; i += nthreads) {
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (i * 8 < p.K) {
            const uint4 g = ld_nc16(p.x + i * 8), u = ld_nc16(p.x_up + i * 8);
            v = scale8(make_uint4(silu_mul_bf16x2(g.x, u.x), silu_mul_bf16x2(g.y, u.y), silu_mul_bf16x2(g.z, u.z),
                                  silu_mul_bf16x2(g.w, u.w)));
        }
        xs[i] = v;
    }
}

// bf16(a + b) of 8 bf16 values (two uint4), and the sum of the squares of the rounded values
__device__ __forceinline__ uint4 add8_bf16(const uint4& a, const uint4& b, float& ss) {
    const u32 av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
    u32 r[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        r[j] = 0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float v = bf16_round(bf16_half(av[j], h) + bf16_half(bv[j], h));
            ss += v * v;
            r[j] |= (u32)f32_to_bf16(v) << (16 * h);
        }
    }
    return make_uint4(r[0], r[1], r[2], r[3]);
}

// bf16(h * inv * (1 + w)) of 8 bf16 values (zero-centred RMSNorm weight w)
__device__ __forceinline__ uint4 norm8_bf16(const uint4& h, const uint4& w, float inv) {
    const u32 hv[4] = {h.x, h.y, h.z, h.w}, wv[4] = {w.x, w.y, w.z, w.w};
    u32 r[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        r[j] = 0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            r[j] |= (u32)f32_to_bf16(bf16_half(hv[j], h) * inv * (1.f + bf16_half(wv[j], h))) << (16 * h);
        }
    }
    return make_uint4(r[0], r[1], r[2], r[3]);
}

// stage_x_scaled for x = RMSNorm(x + x_res) (the decoder layer's residual add and norm before a projection: no norm
// launch). Rounding as kernels/norm/rmsnorm.cu norm_rms_zc: h = bf16(x + res), y = bf16(h * rsqrt(mean(h^2) + eps)
// * (1 + w)); the sum of squares is added in another order (last-bit differences in inv). Every block computes the
// same y (same order in each); block 0 also writes h_out and y_out. All threads; the caller syncs after.
template <int BAR>
__device__ __forceinline__ void stage_x_norm_scaled(const GemvArgs& p, uint4* xs, int kp, int nthreads) {
    __shared__ float warp_ss[32];
    const int pieces = p.K / 8, lane = threadIdx.x & 31, warps = nthreads >> 5;
    const bool writer = blockIdx.x == 0;
    float ss = 0.f;
    for (int i = threadIdx.x; i < kp * 16 + 2; i += nthreads) {
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
    if (BAR == 0) {
        __syncthreads();
    } else {
        asm volatile("bar.sync %0, %1;" ::"n"(BAR), "r"(nthreads));
    }
    float total = 0.f;
    for (int w = 0; w < warps; ++w) total += warp_ss[w];
    const float inv = rsqrtf(total / (float)p.K + p.eps);
    for (int i = threadIdx.x; i < pieces; i += nthreads) {  // the pieces this thread wrote above
        const uint4 y = norm8_bf16(xs[i], ld_nc16(p.norm_w + i * 8), inv);
        if (writer) *reinterpret_cast<uint4*>(p.y_out + i * 8) = y;
        xs[i] = scale8(y);
    }
}


// bf16(bf16(w * bf16(x * inv)) * silu(z)) of 8 bf16 values (kernels/norm/rmsnorm.cu norm_rms_gated's rounding)
__device__ __forceinline__ uint4 gated_norm8_bf16(const uint4& x, const uint4& z, const uint4& w, float inv) {
    const u32 xv[4] = {x.x, x.y, x.z, x.w}, zv[4] = {z.x, z.y, z.z, z.w}, wv[4] = {w.x, w.y, w.z, w.w};
    u32 r[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        u32 word = 0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float xf = bf16_half(xv[j], h), zf = bf16_half(zv[j], h), wf = bf16_half(wv[j], h);
            const float y = bf16_round(wf * bf16_round(xf * inv));
            word |= (u32)f32_to_bf16(y * (zf / (1.f + expf(-zf)))) << (16 * h);
        }
        r[j] = word;
    }
    return make_uint4(r[0], r[1], r[2], r[3]);
}

// stage_x_scaled for x = the GDN output's gated RMSNorm over 128-wide heads (x the recurrence's output [1, HV * 128],
// the gate z = x_up, weight norm_w [128], eps): GatedDeltaNet's norm before out_proj with no launch of its own. A
// head is 16 pieces of 8 = 16 consecutive threads (the loop steps by nthreads, a multiple of 32, over a uniform
// trip count), so mean(x^2) is a 16-lane shuffle sum. Needs K % 128 == 0 (gemv_bt.py checks).
__device__ __forceinline__ void stage_x_gated_norm_scaled(const GemvArgs& p, uint4* xs, int kp, int nthreads) {
    const int pieces = p.K / 8, total = kp * 16 + 2;
    for (int base = 0; base < total; base += nthreads) {
        const int i = base + threadIdx.x;
        uint4 x = make_uint4(0u, 0u, 0u, 0u), z = x;
        float ss = 0.f;
        if (i < pieces) {
            x = ld_nc16(p.x + i * 8), z = ld_nc16(p.x_up + i * 8);
            const u32 xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                ss += bf16_half(xv[j], 0) * bf16_half(xv[j], 0);
                ss += bf16_half(xv[j], 1) * bf16_half(xv[j], 1);
            }
        }
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (i >= total) continue;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (i < pieces) {
            v = scale8(gated_norm8_bf16(x, z, ld_nc16(p.norm_w + (i & 15) * 8), rsqrtf(ss / 128.f + p.eps)));
        }
        xs[i] = v;
    }
}

// the staging of mode XS by threads [0, nthreads) of the block (nthreads a multiple of 32; the norm's barrier is
// __syncthreads for BAR 0, else named barrier BAR of nthreads threads); the caller syncs after
template <int XS, int BAR = 0>
__device__ __forceinline__ void stage_x_mode(const GemvArgs& p, uint4* xs, int kp, int nthreads) {
    if (XS == XS_SILU) {
        stage_x_silu_scaled(p, xs, kp, nthreads);
    } else if (XS == XS_NORM) {
        stage_x_norm_scaled<BAR>(p, xs, kp, nthreads);
    } else if (XS == XS_GNORM) {
        stage_x_gated_norm_scaled(p, xs, kp, nthreads);
    } else {
        stage_x_scaled(p, xs, kp, nthreads);
    }
}
