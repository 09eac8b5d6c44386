// prologue.cu: the per-token work of a Qwen3.5 gated-attention layer around the attention itself, one launch each.
//
// attn_qk_norm_rope_cache: grid ceil(T * (nH + 2 nKV) / 4), block 128 = 4 warps; warp = one item (token t, head j):
//   j < nH        query head: zero-centred RMSNorm over HD (q_norm), partial RoPE on dims [0, ROT), -> q_out[t, j]
//   j < nH + nKV  key head:   RMSNorm (k_norm), RoPE, -> k_pool[slots[t], j - nH]
//   else          value head: copied to v_pool[slots[t], j - nH - nKV]
//   lane l owns dims [l DPL, l DPL + DPL) (DPL = HD / 32); a RoPE partner dim (i +- ROT / 2) is the same slot of
//   lane l +- ROT / (2 DPL), read by a shuffle (ops.py requires ROT / 2 % DPL == 0). slots[t] < 0: nothing written
//   to the pools (a padding token).
// attn_gate_mul: grid ceil(T nH HD / 8 / 256), block 256; out[t, i] = bf16(attn[t, i] * bf16(sigmoid(gate[t, i])))
//   for i < nH HD, 8 values a thread (gate = query_gate's second half of each head).
// Formulas and rounding as the torch code they replace (worker/layers/attention.py, norm.py, rope.py; transformers
// Qwen3_5Attention, model-spec.md 1.5-1.6): xn = bf16(x * rsqrt(mean(x^2) + eps) * (1 + w)) (rsqrtf as
// kernels/norm/rmsnorm.cu); RoPE on bf16: y_i = bf16(bf16(xn_i cos_i) + bf16(r_i sin_i)), r = cat(-x2, x1) (NeoX
// rotate-half); sigmoid in f32 as torch, 1 / (1 + exp(-x)).
typedef unsigned short u16;
typedef unsigned int u32;

#ifndef HD
#define HD 256
#endif
#define DPL (HD / 32)

__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float(((u32)h) << 16); }
__device__ __forceinline__ u16 f2bf(float x) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float rbf(float x) { return bf2f(f2bf(x)); }

__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// DPL bf16 at p (DPL * 2 bytes aligned) <-> f32
__device__ __forceinline__ void load_dims(const u16* p, float (&v)[DPL]) {
  u32 w[DPL / 2];
#if DPL == 8
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  w[0] = u.x, w[1] = u.y, w[2] = u.z, w[3] = u.w;
#elif DPL == 4
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  w[0] = u.x, w[1] = u.y;
#else
  w[0] = *reinterpret_cast<const u32*>(p);
#endif
#pragma unroll
  for (int i = 0; i < DPL / 2; ++i)
    v[2 * i] = __uint_as_float(w[i] << 16), v[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
}
__device__ __forceinline__ void store_dims(u16* p, const float (&v)[DPL]) {
  u32 w[DPL / 2];
#pragma unroll
  for (int i = 0; i < DPL / 2; ++i) w[i] = (u32)f2bf(v[2 * i]) | ((u32)f2bf(v[2 * i + 1]) << 16);
#if DPL == 8
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
#elif DPL == 4
  *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
#else
  *reinterpret_cast<u32*>(p) = w[0];
#endif
}

// the warp's head vector v (this lane's dims) normalised with weight w, then rotated on dims [0, rot)
__device__ __forceinline__ void norm_rope(float (&v)[DPL], const u16* w, const u16* cs, const u16* sn, int rot,
                                          float eps) {
  const int lane = threadIdx.x & 31, d0 = lane * DPL;
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < DPL; ++i) ss += v[i] * v[i];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = rsqrtf(ss / (float)HD + eps);
  float wv[DPL];
  load_dims(w + d0, wv);
#pragma unroll
  for (int i = 0; i < DPL; ++i) v[i] = rbf(v[i] * inv * (1.f + wv[i]));
  const int half = rot >> 1, shift = half / DPL;
  const bool low = d0 < half, in_rot = d0 < rot;
  const int partner = in_rot ? (low ? lane + shift : lane - shift) : lane;
  float c[DPL], s[DPL];
  if (in_rot) load_dims(cs + d0, c), load_dims(sn + d0, s);
#pragma unroll
  for (int i = 0; i < DPL; ++i) {
    const float other = __shfl_sync(0xffffffffu, v[i], partner);
    if (in_rot) v[i] = rbf(rbf(v[i] * c[i]) + rbf((low ? -other : other) * s[i]));
  }
}

// qg [T, nH, 2 HD] (token stride s_qg; a head's query then its gate); key, val [T, nKV HD] (strides s_k, s_v);
// qw, kw [HD]; cs, sn [T, rot] (stride s_cs); slots [T] int64; q_out [T, nH, HD] contiguous; k_pool, v_pool
// [pool slots, nKV, HD] contiguous. All bf16 but slots; every row start aligned to DPL * 2 bytes.
extern "C" __global__ void __launch_bounds__(128) attn_qk_norm_rope_cache(
    const u16* __restrict__ qg, long long s_qg, const u16* __restrict__ key, long long s_k,
    const u16* __restrict__ val, long long s_v, const u16* __restrict__ qw, const u16* __restrict__ kw,
    const u16* __restrict__ cs, const u16* __restrict__ sn, long long s_cs, const long long* __restrict__ slots,
    u16* __restrict__ q_out, u16* __restrict__ k_pool, u16* __restrict__ v_pool, int T, int nH, int nKV, int rot,
    float eps) {
  pdl_wait();  // every input is written by the kernels before this one (the QKV projection)
  const int per_token = nH + 2 * nKV;
  const long long item = (long long)blockIdx.x * 4 + (threadIdx.x >> 5);
  if (item >= (long long)T * per_token) return;
  const int t = (int)(item / per_token), j = (int)(item % per_token), d0 = (threadIdx.x & 31) * DPL;
  const long long slot = slots[t];
  float v[DPL];
  if (j < nH) {
    load_dims(qg + t * s_qg + (long long)j * 2 * HD + d0, v);
    norm_rope(v, qw, cs + t * s_cs, sn + t * s_cs, rot, eps);
    store_dims(q_out + ((long long)t * nH + j) * HD + d0, v);
  } else if (j < nH + nKV) {
    load_dims(key + t * s_k + (long long)(j - nH) * HD + d0, v);
    norm_rope(v, kw, cs + t * s_cs, sn + t * s_cs, rot, eps);
    if (slot >= 0) store_dims(k_pool + (slot * nKV + (j - nH)) * HD + d0, v);
  } else if (slot >= 0) {
    load_dims(val + t * s_v + (long long)(j - nH - nKV) * HD + d0, v);
    store_dims(v_pool + (slot * nKV + (j - nH - nKV)) * HD + d0, v);
  }
}

// attn [T, nH HD] contiguous; qg as above (the gate of head h at h * 2 HD + HD); out [T, nH HD] contiguous
extern "C" __global__ void __launch_bounds__(256) attn_gate_mul(const u16* __restrict__ attn,
                                                                const u16* __restrict__ qg, long long s_qg,
                                                                u16* __restrict__ out, int T, int nH) {
  pdl_wait();
  const long long e = ((long long)blockIdx.x * 256 + threadIdx.x) * 8, width = (long long)nH * HD;
  if (e >= T * width) return;
  const long long t = e / width, i = e % width, h = i / HD, d = i % HD;
  const uint4 a = *reinterpret_cast<const uint4*>(attn + e);
  const uint4 g = *reinterpret_cast<const uint4*>(qg + t * s_qg + h * 2 * HD + HD + d);
  const u32 aw[4] = {a.x, a.y, a.z, a.w}, gw[4] = {g.x, g.y, g.z, g.w};
  u32 r[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float lo = __uint_as_float(gw[k] << 16), hi = __uint_as_float(gw[k] & 0xFFFF0000u);
    lo = rbf(1.f / (1.f + expf(-lo))), hi = rbf(1.f / (1.f + expf(-hi)));
    r[k] = (u32)f2bf(__uint_as_float(aw[k] << 16) * lo) | ((u32)f2bf(__uint_as_float(aw[k] & 0xFFFF0000u) * hi) << 16);
  }
  *reinterpret_cast<uint4*>(out + e) = make_uint4(r[0], r[1], r[2], r[3]);
}
