// decode_common.cuh: what the decode attention kernels share (paged_decode.cu, decode_tile.cu, decode_mma.cu): bf16
// carried as u16, the warp reductions, the layout of a split's workspace entry that paged_decode_combine reads, the
// kernels' arguments and the store of a split's result.
#pragma once

typedef unsigned short u16;
typedef unsigned int u32;

#ifndef HD
#define HD 256
#endif
#ifndef GMAX
#define GMAX 8
#endif
#define NEG_INF __int_as_float(0xff800000u)  // -infinity (NVRTC has no math.h INFINITY)
// ws entry of (row, kv head, split): acc [GMAX][HD] (unnormalised), then m [GMAX], then l [GMAX]
#define WS_M (GMAX * HD)
#define WS_L (GMAX * HD + GMAX)
#define WS_ENTRY (GMAX * HD + 2 * GMAX)

__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float(((u32)h) << 16); }
__device__ __forceinline__ u16 f2bf(float x) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// the arguments of paged_decode.cu's and decode_mma.cu's kernels
struct Args {
  const u16* q;             // [Nd, nH, HD] (row stride sq elements)
  long long sq;
  const u16 *k, *v;         // [blocks, BS, nKV, HD]
  const long long* tables;  // [Nd, B] (row stride st)
  long long st;
  const int* num_keys;      // [Nd]
  u16* out;                 // [Nd, nH, HD] contiguous
  float* ws;                // [Nd, nKV, S, WS_ENTRY] (S > 1)
  int nKV, G, BS;
  float scale_log2;         // softmax scale * log2(e)
};

// query head g (of kv head h, row n), dim d of a split's merged sums o (running max mx, sum L): S = 1 the bf16
// output o / L, else o (and at d = 0 mx and L) into the split's ws entry
__device__ __forceinline__ void store_split(const Args& a, int n, int h, int split, int splits, int g, int d, float o,
                                            float mx, float L) {
  if (splits == 1) {
    a.out[((long long)n * a.nKV * a.G + (long long)h * a.G + g) * HD + d] = f2bf(o / L);
    return;
  }
  float* e = a.ws + (((long long)n * a.nKV + h) * splits + split) * WS_ENTRY;
  e[g * HD + d] = o;
  if (d == 0) e[WS_M + g] = mx, e[WS_L + g] = L;
}
