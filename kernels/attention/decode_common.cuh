// decode_common.cuh: what the two decode attention kernels share (paged_decode.cu, decode_tile.cu): bf16 carried as
// u16, the warp reductions, and the layout of a split's workspace entry that paged_decode_combine reads.
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
