// decode_tile.cu: decode attention for few rows (Nd < ops.MIN_ROWS), where paged_decode.cu's per-warp chains of
// dependent loads leave the GPU idle (one row at context 512: ~28 us for 1 MB of K / V, kernels/attention/NOTES.md).
// Same arguments, math and split workspace as paged_decode (whose combine kernel merges the splits).
//
// Grid (S, nKV, Nd), block 128 = 4 warps; block (s, h, n) takes keys [s L, min((s + 1) L, nk)) of row n (L = TK
// ceil(ceil(nk / TK) / S)) in tiles of TK = 32 keys. Per tile: threads 0..31 look the keys up in the block table;
// every thread then copies 16-byte pieces of the tile's K and V rows (2 x 32 x HD x 2 bytes, all in flight at once,
// cp.async) into shared memory (rows past the range zero-filled); warp w scores query heads w, w + 4 of the group
// (lane = key; a lane walks its key's row starting at piece `lane`, so a quarter-warp's 16-byte reads hit distinct
// banks); the online softmax per head (exp2, q pre-scaled by scale * log2 e) leaves the tile's probabilities and
// the rescale factor in shared memory; then thread t accumulates dims [DPT t, DPT t + DPT) of every head over the
// tile's V rows (DPT = HD / 128). S = 1: out = acc / l (bf16); else (acc, m, l) to ws as paged_decode writes them.
// Sources: online softmax, Milakov & Gimelshein 2018; split keys, flash-decoding (Dao et al., 2023).
#include "decode_common.cuh"

#define TK 32
#define PIECES (HD / 8)  // 16-byte pieces of a row
#define DPT (HD / 128)

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const u32 d = (u32)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}

struct TileSmem {
  u16 k[TK][HD], v[TK][HD];
  float q[GMAX][HD];
  float p[GMAX][TK];
  float m[GMAX], l[GMAX], alpha[GMAX];
  long long slot[TK];
};

// the tile's K and V rows of kv head h into shared memory (zeros where slot < 0)
__device__ __forceinline__ void load_tile(TileSmem& sm, const u16* k, const u16* v, int nKV, int h) {
  for (int c = threadIdx.x; c < TK * PIECES; c += blockDim.x) {
    const int key = c / PIECES, piece = c - key * PIECES;
    const long long slot = sm.slot[key];
    if (slot >= 0) {
      const long long off = (slot * nKV + h) * HD + piece * 8;
      cp_async16(&sm.k[key][piece * 8], k + off);
      cp_async16(&sm.v[key][piece * 8], v + off);
    } else {
      *reinterpret_cast<uint4*>(&sm.k[key][piece * 8]) = make_uint4(0u, 0u, 0u, 0u);
      *reinterpret_cast<uint4*>(&sm.v[key][piece * 8]) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
}

// warp w: scores of query heads w and w + 4 against the tile's keys (lane = key), online softmax into sm
__device__ __forceinline__ void score_tile(TileSmem& sm, int G, int valid) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g0 = warp, g1 = warp + 4;
  if (g0 >= G) return;
  const bool two = g1 < G;
  float s0 = 0.f, s1 = 0.f;
#pragma unroll 4
  for (int c = 0; c < PIECES; ++c) {
    const int pc = (c + lane) % PIECES;
    const uint4 u = *reinterpret_cast<const uint4*>(&sm.k[lane][pc * 8]);
    const u32 w[4] = {u.x, u.y, u.z, u.w};
    const float* q0 = &sm.q[g0][pc * 8];
    const float* q1 = &sm.q[two ? g1 : g0][pc * 8];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float lo = __uint_as_float(w[e] << 16), hi = __uint_as_float(w[e] & 0xFFFF0000u);
      s0 += q0[2 * e] * lo + q0[2 * e + 1] * hi;
      s1 += q1[2 * e] * lo + q1[2 * e + 1] * hi;
    }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int g = i ? g1 : g0;
    if (i && !two) break;
    const float s = lane < valid ? (i ? s1 : s0) : NEG_INF;
    const float m_old = sm.m[g], mn = fmaxf(m_old, warp_max(s));  // finite: the tile has a valid key
    const float p = exp2f(s - mn), sum = warp_sum(p);
    sm.p[g][lane] = p;
    if (lane == 0) {
      const float alpha = m_old == NEG_INF ? 0.f : exp2f(m_old - mn);
      sm.alpha[g] = alpha, sm.m[g] = mn, sm.l[g] = sm.l[g] * alpha + sum;
    }
  }
}

// q [Nd, nH, HD] bf16 (row stride sq); k, v pools [blocks, BS, nKV, HD] bf16; tables [Nd, B] int64 (row stride st);
// num_keys [Nd] int32 (>= 1); out [Nd, nH, HD] bf16; ws [Nd, nKV, S, WS_ENTRY] f32 (S > 1 only)
extern "C" __global__ void __launch_bounds__(128)
paged_decode_tile(const u16* __restrict__ q, long long sq, const u16* __restrict__ k, const u16* __restrict__ v,
                  const long long* __restrict__ tables, long long st, const int* __restrict__ num_keys,
                  u16* __restrict__ out, float* __restrict__ ws, int nKV, int G, int BS, float scale_log2) {
  __shared__ __align__(16) TileSmem sm;
  const int split = blockIdx.x, splits = gridDim.x, h = blockIdx.y, n = blockIdx.z, t = threadIdx.x;
  for (int i = t; i < G * HD / 2; i += blockDim.x) {  // bf16 pairs of the G query rows, scaled
    const int g = (2 * i) / HD, d = 2 * i - g * HD;
    const u32 w = *reinterpret_cast<const u32*>(q + n * sq + (long long)(h * G + g) * HD + d);
    sm.q[g][d] = __uint_as_float(w << 16) * scale_log2, sm.q[g][d + 1] = __uint_as_float(w & 0xFFFF0000u) * scale_log2;
  }
  if (t < GMAX) sm.m[t] = NEG_INF, sm.l[t] = 0.f;
  const int nk = num_keys[n], per = TK * (((nk + TK - 1) / TK + splits - 1) / splits);
  const int lo = min(nk, split * per), hi = min(nk, lo + per);
  float acc[GMAX][DPT];
#pragma unroll
  for (int g = 0; g < GMAX; ++g)
#pragma unroll
    for (int e = 0; e < DPT; ++e) acc[g][e] = 0.f;
  for (int j0 = lo; j0 < hi; j0 += TK) {
    if (t < TK) {
      const int j = j0 + t;
      sm.slot[t] = j < hi ? tables[n * st + j / BS] * BS + j % BS : -1;
    }
    __syncthreads();
    load_tile(sm, k, v, nKV, h);
    __syncthreads();
    score_tile(sm, G, hi - j0);
    __syncthreads();
#pragma unroll
    for (int g = 0; g < GMAX; ++g) {
      if (g >= G) break;
      const float alpha = sm.alpha[g];
#pragma unroll
      for (int e = 0; e < DPT; ++e) acc[g][e] *= alpha;
    }
#pragma unroll 4
    for (int j = 0; j < TK; ++j) {
      float vv[DPT];
#if DPT == 2
      const u32 w = *reinterpret_cast<const u32*>(&sm.v[j][2 * t]);
      vv[0] = __uint_as_float(w << 16), vv[1] = __uint_as_float(w & 0xFFFF0000u);
#else
      vv[0] = __uint_as_float(((u32)sm.v[j][t]) << 16);
#endif
#pragma unroll
      for (int g = 0; g < GMAX; ++g) {
        if (g >= G) break;
        const float p = sm.p[g][j];
#pragma unroll
        for (int e = 0; e < DPT; ++e) acc[g][e] += p * vv[e];
      }
    }
    __syncthreads();  // the next tile overwrites slot, k, v and p
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < GMAX; ++g) {
    if (g >= G) break;
#pragma unroll
    for (int e = 0; e < DPT; ++e) {
      const int d = DPT * t + e;
      if (splits == 1) {
        out[((long long)n * nKV * G + (long long)h * G + g) * HD + d] = f2bf(acc[g][e] / sm.l[g]);
      } else {
        float* entry = ws + (((long long)n * nKV + h) * splits + split) * WS_ENTRY;
        entry[g * HD + d] = acc[g][e];
        if (d == 0) entry[WS_M + g] = sm.m[g], entry[WS_L + g] = sm.l[g];
      }
    }
  }
}
