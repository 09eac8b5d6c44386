// recurrent_common.cuh (included by recurrent.cu and recurrent_cp.cu, after gdn_common.cuh): the state
// layout defines, packing and the per-thread steps both fused-decode kernels share.
#pragma once

#define KD 128
#define VD 128

#if STATE_BF16
typedef u16 state_t;
#define E16 8
#else
typedef float state_t;
#define E16 4
#endif

#ifndef NARROW
#define NARROW 0
#endif
#ifndef LEAN
#define LEAN 0
#endif
#ifndef NARROW_TPR
#define NARROW_TPR 16
#endif
#if STATE_BF16 && NARROW
#define VEC 4
#define TPR NARROW_TPR
typedef uint2 raw_t;
#else
#define VEC E16
#define TPR 8
typedef uint4 raw_t;
#endif
#ifndef THREADS
#define THREADS 256
#endif
#define RG (THREADS / TPR)
#define PASSES (KD / RG)
#define NWARP (THREADS / 32)
// blocks per SM the register allocation must allow. bf16: 3 (77 registers) measured 43.6 us at N=32 against
// 50.7 us for 4 (64 registers + 24-byte spill); f32: 5 (48 registers, no spill); bf16 NARROW: 4 (64 registers;
// 5 spills 60 bytes).
#ifndef MIN_BLOCKS
#define MIN_BLOCKS (!STATE_BF16 ? 5 : NARROW ? 4 : 3)
#endif
#define BV (TPR * VEC)

// raw (packed) state <-> floats: 16 bytes of bf16 (8), 16 bytes of f32 (4), 8 bytes of bf16 (4)
#if STATE_BF16
__device__ __forceinline__ void unpack_state(const uint4& u, float (&x)[8]) {
  const u32 w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) { x[2 * i] = bflo(w[i]); x[2 * i + 1] = bfhi(w[i]); }
}
__device__ __forceinline__ void unpack_state(const uint2& u, float (&x)[4]) {
  x[0] = bflo(u.x); x[1] = bfhi(u.x); x[2] = bflo(u.y); x[3] = bfhi(u.y);
}
__device__ __forceinline__ void pack_state(const float (&x)[8], uint4& u) {
  u = make_uint4(pack_bf2(x[0], x[1]), pack_bf2(x[2], x[3]), pack_bf2(x[4], x[5]), pack_bf2(x[6], x[7]));
}
__device__ __forceinline__ void pack_state(const float (&x)[4], uint2& u) {
  u = make_uint2(pack_bf2(x[0], x[1]), pack_bf2(x[2], x[3]));
}
#else
__device__ __forceinline__ void unpack_state(const uint4& u, float (&x)[4]) {
  x[0] = __uint_as_float(u.x); x[1] = __uint_as_float(u.y); x[2] = __uint_as_float(u.z); x[3] = __uint_as_float(u.w);
}
__device__ __forceinline__ void pack_state(const float (&x)[4], uint4& u) {
  u = make_uint4(__float_as_uint(x[0]), __float_as_uint(x[1]), __float_as_uint(x[2]), __float_as_uint(x[3]));
}
#endif

__device__ __forceinline__ void opaque(uint2& u) { asm volatile("" : "+r"(u.x), "+r"(u.y)); }
__device__ __forceinline__ void opaque(uint4& u) { asm volatile("" : "+r"(u.x), "+r"(u.y), "+r"(u.z), "+r"(u.w)); }

// Warp 0: l2-normalise q (times scale) and k of key head h into shared memory; k.q and the gates into scal.
__device__ __forceinline__ void decode_prologue(const u16* qp, const u16* kp, float a, float b, float a_log,
                                                float dt_bias, float scale, float* qs, float* ks,
                                                float* scal) {
  const int lane = threadIdx.x & 31;
  const uint2 qu = *reinterpret_cast<const uint2*>(qp + 4 * lane);
  const uint2 ku = *reinterpret_cast<const uint2*>(kp + 4 * lane);
  float qv[4] = {bflo(qu.x), bfhi(qu.x), bflo(qu.y), bfhi(qu.y)};
  float kv[4] = {bflo(ku.x), bfhi(ku.x), bflo(ku.y), bfhi(ku.y)};
  float sq = 0.f, sk = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) { sq += qv[i] * qv[i]; sk += kv[i] * kv[i]; }
  const float rq = rsqrtf(warp_sum(sq) + GDN_L2_EPS) * scale, rk = rsqrtf(warp_sum(sk) + GDN_L2_EPS);
  float dot = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    qv[i] *= rq; kv[i] *= rk; dot += qv[i] * kv[i];
    qs[4 * lane + i] = qv[i]; ks[4 * lane + i] = kv[i];
  }
  dot = warp_sum(dot);
  if (lane == 0) {
    scal[0] = dot;
    scal[1] = __expf(gdn_gate(a, a_log, dt_bias));
    scal[2] = sigmoidf_(b);
  }
}

// this thread's VEC values of v (bf16, kept packed) and of o
__device__ __forceinline__ void load_v(const u16* vp, u32 (&vraw)[VEC / 2]) {
#pragma unroll
  for (int c = 0; c < VEC / 2; ++c) vraw[c] = *reinterpret_cast<const u32*>(vp + 2 * c);
}

__device__ __forceinline__ void store_o(out_t* op, const float (&out)[VEC]) {
#pragma unroll
  for (int c = 0; c < VEC; c += 2) st_out2(op + c, out[c], out[c + 1]);
}

// The gated delta rule's column update once the warps' partial k.S and q.S sums for this thread's E columns
// (cg * E_ .. + E_) sit in red[warp][0 / 1]: per column, d = beta (v - decay k.S) and out = decay q.S + d (k.q)
// (scal = {k.q, decay, beta}; recurrent.cu's header gives the recurrence). vraw: the E_ bf16 values of v, packed.
template <int WARPS_, int COLS_, int E_>
__device__ __forceinline__ void delta_columns(const float (&red)[WARPS_][2][COLS_], int cg, const u32 (&vraw)[E_ / 2],
                                              const float* scal, float (&d)[E_], float (&out)[E_]) {
  const float kq = scal[0], decay = scal[1], beta = scal[2];
#pragma unroll
  for (int c = 0; c < E_; ++c) {
    float tk = 0.f, tq = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS_; ++w) { tk += red[w][0][cg * E_ + c]; tq += red[w][1][cg * E_ + c]; }
    const float vc = (c & 1) ? bfhi(vraw[c >> 1]) : bflo(vraw[c >> 1]);
    d[c] = beta * (vc - decay * tk);
    out[c] = decay * tq + d[c] * kq;
  }
}
