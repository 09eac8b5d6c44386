// paged_decode.cu: decode attention over the paged KV pools, one query token per row, GQA, bf16 in / bf16 out,
// f32 scores and accumulation (flash-decoding: online softmax, the keys of a row optionally split over blocks).
//
// Letters: Nd decode rows, nH query heads, nKV kv heads, G = nH / nKV query heads per kv head (<= 8), HD head dim
// (compile-time: 64, 128 or 256), BS block size (tokens per KV block), S splits per (row, kv head).
// paged_decode: grid (S, nKV, Nd), block 128 = 4 warps. Block (s, h, n) takes the keys [s L, min((s + 1) L, nk))
// of row n (nk = num_keys[n], L = 32 * ceil(ceil(nk / 32) / S)) against query heads h G .. h G + G - 1, in tiles
// of 32 keys, tile t to warp t % 4:
//   scores, lane = key: the lane walks its key's HD values (16-byte loads, 8 in flight) against the G query vectors
//     (f32 in shared memory, pre-scaled by scale * log2 e); keys past the range score -inf;
//   online softmax per query head over the tile (warp max; exp2); the tile's probabilities to shared memory;
//   P V, lane = HD / 32 dims: every key's V row (8 rows in flight) times its G probabilities into the lane's
//     G x HD / 32 accumulators (rescaled when the running max grows).
// The 4 warps' (m, l, acc) merge through shared memory; S = 1: out = acc / l (bf16), else (m, l, acc) go to
// ws[n][h][s] for paged_decode_combine: grid (nH, Nd), block HD / 4 (4 dims a thread), the splits merged the same
// way. Source of the online softmax: Milakov & Gimelshein 2018; split keys: flash-decoding (Dao et al., 2023).
#include "decode_common.cuh"

#define WARPS 4
// KPL keys a lane (tiles of TILE = 32 KPL keys, the lane's keys j0 + lane + 32 i): each query value read from shared
// memory serves KPL keys
#ifndef KPL
#define KPL 1
#endif
#define TILE (32 * KPL)
#define DPL (HD / 32)                 // dims a lane owns in P V

// DPL (8, 4 or 2) bf16 of a row into f32
__device__ __forceinline__ void load_dims(const u16* p, float (&v)[DPL]) {
#if DPL == 8
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const u32 w[4] = {u.x, u.y, u.z, u.w};
#elif DPL == 4
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  const u32 w[2] = {u.x, u.y};
#else
  const u32 w[1] = {*reinterpret_cast<const u32*>(p)};
#endif
#pragma unroll
  for (int j = 0; j < DPL / 2; ++j)
    v[2 * j] = __uint_as_float(w[j] << 16), v[2 * j + 1] = __uint_as_float(w[j] & 0xFFFF0000u);
}

// p: a warp's tile probabilities (while the tiles run); acc: the warps' partial outputs (after them, for the merge)
struct Smem {
  float q[GMAX][HD];
  float m[WARPS][GMAX], l[WARPS][GMAX];
  union {
    float p[WARPS][TILE][GMAX];
    float acc[WARPS][GMAX][HD];
  };
};

// scores of the lane's KPL keys against the G query vectors; -inf where a key is not in [lo, hi)
__device__ __forceinline__ void tile_scores(const Args& a, const Smem& sm, const u16* const (&krow)[KPL],
                                            const bool (&valid)[KPL], float (&s)[KPL][GMAX]) {
#pragma unroll
  for (int i = 0; i < KPL; ++i)
#pragma unroll
    for (int g = 0; g < GMAX; ++g) s[i][g] = 0.f;
#pragma unroll 8
  for (int c = 0; c < HD; c += DPL) {  // unrolled: 8 loads of each row in flight, not one at a time
    float kv[KPL][DPL];
#pragma unroll
    for (int i = 0; i < KPL; ++i) load_dims(krow[i] + c, kv[i]);  // an invalid key reads row 0: scored -inf
#pragma unroll
    for (int g = 0; g < GMAX; ++g) {
      if (g >= a.G) break;
#pragma unroll
      for (int e = 0; e < DPL; ++e) {
        const float qv = sm.q[g][c + e];
#pragma unroll
        for (int i = 0; i < KPL; ++i) s[i][g] += qv * kv[i][e];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < KPL; ++i)
#pragma unroll
    for (int g = 0; g < GMAX; ++g) s[i][g] = valid[i] ? s[i][g] : NEG_INF;
}

// one tile of TILE keys (lane = keys j0 + lane + 32 i) folded into the warp's running (m, l, acc)
__device__ __forceinline__ void tile(const Args& a, Smem& sm, int n, int h, int j0, int hi, float (&m)[GMAX],
                                     float (&l)[GMAX], float (&acc)[GMAX][DPL]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long stride = (long long)a.nKV * HD;
  long long slot[KPL];
  bool valid[KPL];
  const u16* krow[KPL];
#pragma unroll
  for (int i = 0; i < KPL; ++i) {
    const int j = j0 + lane + 32 * i;
    valid[i] = j < hi;
    slot[i] = valid[i] ? a.tables[n * a.st + j / a.BS] * a.BS + j % a.BS : 0;
    krow[i] = a.k + slot[i] * stride + (long long)h * HD;
  }
  float s[KPL][GMAX];
  tile_scores(a, sm, krow, valid, s);
#pragma unroll
  for (int g = 0; g < GMAX; ++g) {
    if (g >= a.G) break;
    float mx = s[0][g];
#pragma unroll
    for (int i = 1; i < KPL; ++i) mx = fmaxf(mx, s[i][g]);
    const float mn = fmaxf(m[g], warp_max(mx));  // finite: the tile has a valid key
    const float corr = exp2f(m[g] - mn);
    m[g] = mn;
    l[g] *= corr;  // the lane's share; summed over the warp at the end
#pragma unroll
    for (int i = 0; i < KPL; ++i) {
      const float p = exp2f(s[i][g] - mn);
      l[g] += p;
      sm.p[warp][lane + 32 * i][g] = p;
    }
#pragma unroll
    for (int e = 0; e < DPL; ++e) acc[g][e] *= corr;
  }
  __syncwarp();
  const int count = min(TILE, hi - j0);
#pragma unroll 8
  for (int jj = 0; jj < count; ++jj) {  // unrolled: several V rows in flight
    long long mine = slot[0];
#pragma unroll
    for (int i = 1; i < KPL; ++i) mine = (jj >> 5) == i ? slot[i] : mine;
    const long long sl = __shfl_sync(0xffffffffu, mine, jj & 31);
    float vv[DPL];
    load_dims(a.v + sl * stride + (long long)h * HD + lane * DPL, vv);
#pragma unroll
    for (int g = 0; g < GMAX; ++g) {
      if (g >= a.G) break;
      const float p = sm.p[warp][jj][g];
#pragma unroll
      for (int e = 0; e < DPL; ++e) acc[g][e] += p * vv[e];
    }
  }
  __syncwarp();
}

// the 4 warps' partial results merged (thread = one (query head, dim) at a time): S = 1 the bf16 output acc / l,
// else the unnormalised (m, l, acc) of this split into ws
__device__ __forceinline__ void merge_warps(const Args& a, const Smem& sm, int n, int h, int split, int splits) {
  float* e = a.ws + (((long long)n * a.nKV + h) * splits + split) * WS_ENTRY;
  for (int i = threadIdx.x; i < a.G * HD; i += blockDim.x) {
    const int g = i / HD, d = i - g * HD;
    float mx = NEG_INF;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) mx = fmaxf(mx, sm.m[w][g]);
    float L = 0.f, o = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      const float f = sm.m[w][g] == NEG_INF ? 0.f : exp2f(sm.m[w][g] - mx);
      L += sm.l[w][g] * f, o += sm.acc[w][g][d] * f;
    }
    if (splits == 1) {
      a.out[((long long)n * a.nKV * a.G + (long long)h * a.G + g) * HD + d] = f2bf(o / L);
      continue;
    }
    e[g * HD + d] = o;
    if (d == 0) e[WS_M + g] = mx, e[WS_L + g] = L;
  }
}

// q [Nd, nH, HD] bf16 (row stride sq); k, v pools [blocks, BS, nKV, HD] bf16; tables [Nd, B] int64 (row stride st);
// num_keys [Nd] int32 (>= 1); out [Nd, nH, HD] bf16; ws: see the header (S > 1 only)
extern "C" __global__ void __launch_bounds__(WARPS * 32)
paged_decode(const u16* __restrict__ q, long long sq, const u16* __restrict__ k, const u16* __restrict__ v,
             const long long* __restrict__ tables, long long st, const int* __restrict__ num_keys,
             u16* __restrict__ out, float* __restrict__ ws, int nKV, int G, int BS, float scale_log2) {
  __shared__ __align__(16) Smem sm;
  const Args a{q, sq, k, v, tables, st, num_keys, out, ws, nKV, G, BS, scale_log2};
  const int split = blockIdx.x, splits = gridDim.x, h = blockIdx.y, n = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int i = threadIdx.x; i < G * HD / 8; i += blockDim.x) {  // 16-byte pieces of the G query rows
    const int g = (8 * i) / HD, d = 8 * i - g * HD;
    float x[8];
    const uint4 u = *reinterpret_cast<const uint4*>(q + n * sq + (long long)(h * G + g) * HD + d);
    const u32 w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int e = 0; e < 4; ++e)
      x[2 * e] = __uint_as_float(w[e] << 16), x[2 * e + 1] = __uint_as_float(w[e] & 0xFFFF0000u);
#pragma unroll
    for (int e = 0; e < 8; ++e) sm.q[g][d + e] = x[e] * scale_log2;
  }
  const int nk = num_keys[n], per = 32 * (((nk + 31) / 32 + splits - 1) / splits);
  const int lo = min(nk, split * per), hi = min(nk, lo + per);
  float m[GMAX], l[GMAX], acc[GMAX][DPL];
#pragma unroll
  for (int g = 0; g < GMAX; ++g) {
    m[g] = NEG_INF, l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < DPL; ++e) acc[g][e] = 0.f;
  }
  __syncthreads();
  for (int j0 = lo + TILE * warp; j0 < hi; j0 += TILE * WARPS) tile(a, sm, n, h, j0, hi, m, l, acc);
  __syncthreads();  // every warp is past its tiles: sm.acc may overwrite sm.p
#pragma unroll
  for (int g = 0; g < GMAX; ++g) {
    if (g >= G) break;
    const float lw = warp_sum(l[g]);
    if (lane == 0) sm.m[warp][g] = m[g], sm.l[warp][g] = lw;
#pragma unroll
    for (int e = 0; e < DPL; ++e) sm.acc[warp][g][lane * DPL + e] = acc[g][e];
  }
  __syncthreads();
  merge_warps(a, sm, n, h, split, splits);
}

// ws [Nd, nKV, S, WS_ENTRY] -> out [Nd, nH, HD] bf16: grid (nH, Nd), block HD / 4, thread = 4 dims
extern "C" __global__ void paged_decode_combine(const float* __restrict__ ws, u16* __restrict__ out, int nKV, int G,
                                                int splits) {
  const int head = blockIdx.x, n = blockIdx.y, h = head / G, g = head - h * G, d0 = 4 * threadIdx.x;
  const float* base = ws + ((long long)n * nKV + h) * splits * WS_ENTRY;
  float mx = NEG_INF;
  for (int s = 0; s < splits; ++s) mx = fmaxf(mx, base[s * WS_ENTRY + WS_M + g]);
  float L = 0.f, o[4] = {0.f, 0.f, 0.f, 0.f};
  for (int s = 0; s < splits; ++s) {
    const float* e = base + s * WS_ENTRY;
    const float f = e[WS_M + g] == NEG_INF ? 0.f : exp2f(e[WS_M + g] - mx);
    L += e[WS_L + g] * f;
#pragma unroll
    for (int i = 0; i < 4; ++i) o[i] += e[g * HD + d0 + i] * f;
  }
  u16* dst = out + ((long long)n * nKV * G + head) * HD + d0;
#pragma unroll
  for (int i = 0; i < 4; ++i) dst[i] = f2bf(o[i] / L);
}
