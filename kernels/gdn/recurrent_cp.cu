// recurrent_cp.cu: fused recurrent Gated DeltaNet decode (recurrent.cu's arguments, math and grid), the state tile
// through shared memory.
// gdn_recurrent_decode_cp (CP_THREADS 128 or 256 threads): the block's [128, BV] tile (16 KB; BV = 128 bytes
//   of columns) goes to shared memory with cp.async, so bytes in flight no longer cost registers; thread t
//   then reads 16-byte pieces (columns (t % 8)*E16.., rows t/8 + RG*p) from shared memory and stores the new
//   state straight from registers. Measured slower than the register kernels (NOTES.md, v4); kept selectable.
#include "gdn_common.cuh"
#include "recurrent_common.cuh"

#ifndef CP_THREADS
#define CP_THREADS 128
#endif
#define CP_BV (8 * E16)                    // 128 bytes of columns: 64 bf16 or 32 f32
#define CP_RG (CP_THREADS / 8)             // row groups (8 threads of 16 bytes per 128-byte row piece)
#define CP_PASSES (KD / CP_RG)
#define CP_NWARP (CP_THREADS / 32)
#define CP_CHUNKS (KD * 8 / CP_THREADS)    // 16-byte copies per thread
// 128 threads: 10 blocks (48 registers, no spill; 11 spills 12 bytes), 19.5 KB shared each (11 fit): 160 KB of
// state in flight per SM.  256 threads: 5 blocks (48 registers, 8-byte spill): 80 KB.
#ifndef CP_MIN_BLOCKS
#define CP_MIN_BLOCKS (CP_THREADS == 128 ? 10 : 5)
#endif

__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

extern "C" __global__ void __launch_bounds__(CP_THREADS, CP_MIN_BLOCKS)
gdn_recurrent_decode_cp(const u16* __restrict__ q, const u16* __restrict__ k, long long s_qk,
                        const u16* __restrict__ v, long long s_v, const u16* __restrict__ a,
                        const u16* __restrict__ b, long long s_ab, const float* __restrict__ a_log,
                        const float* __restrict__ dt_bias, state_t* __restrict__ pool, long long s_slot,
                        const int* __restrict__ slot_ids, out_t* __restrict__ o, int H, int HV, float scale) {
  __shared__ __align__(16) state_t tile[KD * CP_BV];
  __shared__ float qs[KD], ks[KD], scal[4];
  __shared__ __align__(16) float red[CP_NWARP][2][CP_BV];
  const int vt = blockIdx.x, hv = blockIdx.y, n = blockIdx.z;
  const int slot = slot_ids[n];
  if (slot < 0) return;
  const int tid = threadIdx.x, cg = tid & 7, rg = tid >> 3, lane = tid & 31, warp = tid >> 5;
  const int col = vt * CP_BV + cg * E16;
  state_t* S0 = pool + (long long)slot * s_slot + (long long)hv * (KD * VD) + vt * CP_BV;
  // whole tile in flight at once: chunk c = tid + CP_THREADS * i is row c / 8, 16-byte piece c % 8
#pragma unroll
  for (int i = 0; i < CP_CHUNKS; ++i) {
    const int c = tid + CP_THREADS * i;
    cp_async16(tile + c * E16, S0 + (c >> 3) * VD + (c & 7) * E16, true);
  }
  cp_async_commit();
  if (warp == 0) {
    const int h = hv / (HV / H);
    decode_prologue(q + n * s_qk + h * KD, k + n * s_qk + h * KD, bf2f(a[n * s_ab + hv]),
                    bf2f(b[n * s_ab + hv]), a_log[hv], dt_bias[hv], scale, qs, ks, scal);
  }
  u32 vraw[E16 / 2];
#pragma unroll
  for (int c = 0; c < E16 / 2; ++c) vraw[c] = *reinterpret_cast<const u32*>(v + n * s_v + hv * VD + col + 2 * c);
  cp_async_wait_all();
  __syncthreads();
  float sk[E16], sq[E16];
#pragma unroll
  for (int c = 0; c < E16; ++c) sk[c] = sq[c] = 0.f;
#pragma unroll
  for (int p = 0; p < CP_PASSES; ++p) {
    const int r = rg + CP_RG * p;
    float s[E16];
    unpack_state(*reinterpret_cast<const uint4*>(tile + r * CP_BV + cg * E16), s);
    const float kr = ks[r], qr = qs[r];
#pragma unroll
    for (int c = 0; c < E16; ++c) { sk[c] += s[c] * kr; sq[c] += s[c] * qr; }
  }
#pragma unroll
  for (int c = 0; c < E16; ++c) {
#pragma unroll
    for (int m = 8; m < 32; m <<= 1) {
      sk[c] += __shfl_xor_sync(0xffffffffu, sk[c], m);
      sq[c] += __shfl_xor_sync(0xffffffffu, sq[c], m);
    }
    if (lane < 8) { red[warp][0][cg * E16 + c] = sk[c]; red[warp][1][cg * E16 + c] = sq[c]; }
  }
  __syncthreads();
  const float decay = scal[1];
  float d[E16], out[E16];
  delta_columns(red, cg, vraw, scal, d, out);
  state_t* S = S0 + cg * E16;
#pragma unroll
  for (int p = 0; p < CP_PASSES; ++p) {
    const int r = rg + CP_RG * p;
    const float kr = ks[r];
    float s[E16];
    unpack_state(*reinterpret_cast<const uint4*>(tile + r * CP_BV + cg * E16), s);
#pragma unroll
    for (int c = 0; c < E16; ++c) s[c] = decay * s[c] + kr * d[c];
    uint4 w;
    pack_state(s, w);
    *reinterpret_cast<uint4*>(S + r * VD) = w;
  }
  if (rg == 0) {
    out_t* op = o + ((long long)n * HV + hv) * VD + col;
#pragma unroll
    for (int c = 0; c < E16; c += 2) st_out2(op + c, out[c], out[c + 1]);
  }
}
