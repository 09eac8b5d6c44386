// recurrent.cu: fused recurrent Gated DeltaNet decode, one token for each of N sequences, state in place.
// Two kernels, both: block (vt, hv, n) owns columns [vt*BV, vt*BV + BV) of pool[slot_ids[n], hv]
// (state [K=128, V=128] row-major), one pass over the state (read once, written once).
// S^T k and S^T q are reduced together, since after the update
// o = S'^T q = e^g S^T q + d (k.q) with d = beta (v - e^g S^T k)  (model-spec 1.7 rearranged).
//
// gdn_recurrent_decode: the state goes through registers. Block THREADS (256; 128 for t128x6) = RG row groups x TPR
// column groups.
// Thread t: columns vt*BV + (t % TPR)*VEC .. +VEC (one access), rows t/TPR + RG*p for p < PASSES.
//   STATE_BF16=0: f32 state, VEC 4 (16 B), TPR 8, BV 32;  STATE_BF16=1: bf16 state, VEC 8 (16 B), TPR 8, BV 64;
//   STATE_BF16=1 NARROW=1: bf16, VEC 4 (8-byte accesses), TPR 16, BV 64, 8 passes: half the accumulators per
//   byte in flight of VEC 8 (64 registers, 4 blocks/SM). H200 N=32: 35.0 us against 43.5 us for VEC 8.
//   + LEAN=1 THREADS=128 MIN_BLOCKS=6 ("t128x6"): 16 passes, 80 registers, 6 blocks/SM, 96 KB of state in flight
//   per SM: 32.7 us at N=32 (74.5% of copy bandwidth); the bf16 default below 16 sequences (NOTES.md, run 6).
//   + NARROW_TPR=32 THREADS=256 MIN_BLOCKS=3 ("w128"): one block per (sequence, value head), BV 128.
// gdn_recurrent_decode_cp: recurrent_cp.cu.
#include "gdn_common.cuh"
#include "recurrent_common.cuh"

// q, k [N, H, K] bf16 (token stride s_qk), v [N, HV, V] bf16 (token stride s_v), a, b [N, HV] bf16 (stride s_ab);
// a_log, dt_bias [HV] f32; pool [S, HV, K, V] state_t (slot stride s_slot elements), updated in place;
// slot_ids [N] int32 (< 0: skip);
// o [N, HV, V] out_t (bf16, or f32 with OUT_F32) contiguous.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gdn_recurrent_decode(const u16* __restrict__ q, const u16* __restrict__ k, long long s_qk,
                     const u16* __restrict__ v, long long s_v, const u16* __restrict__ a,
                     const u16* __restrict__ b, long long s_ab, const float* __restrict__ a_log,
                     const float* __restrict__ dt_bias, state_t* __restrict__ pool, long long s_slot,
                     const int* __restrict__ slot_ids, out_t* __restrict__ o, int H, int HV, float scale) {
  __shared__ float qs[KD], ks[KD], scal[4];
  __shared__ __align__(16) float red[NWARP][2][BV];
  const int vt = blockIdx.x, hv = blockIdx.y, n = blockIdx.z;
  pdl_allow_dependents();
  const int slot = slot_ids[n];
  if (slot < 0) {
    pdl_wait();
    return;
  }
  const int tid = threadIdx.x, cg = tid % TPR, rg = tid / TPR, lane = tid & 31, warp = tid >> 5;
  const int col = vt * BV + cg * VEC;
  state_t* S = pool + (long long)slot * s_slot + (long long)hv * (KD * VD) + col;
  raw_t raw[PASSES];
#pragma unroll
  for (int p = 0; p < PASSES; ++p) raw[p] = *reinterpret_cast<const raw_t*>(S + (rg + RG * p) * VD);
  // programmatic dependent launch (_decode.py, pdl): the slot ids and state above are not written by the kernel
  // launched just before this one; q, k, v, a, b and every write wait for it to complete
  pdl_wait();
  if (warp == 0) {
    const int h = hv / (HV / H);
    decode_prologue(q + n * s_qk + h * KD, k + n * s_qk + h * KD, bf2f(a[n * s_ab + hv]),
                    bf2f(b[n * s_ab + hv]), a_log[hv], dt_bias[hv], scale, qs, ks, scal);
  }
#if !LEAN
  // v kept packed (VEC bf16) until after the reduction
  u32 vraw[VEC / 2];
  load_v(v + n * s_v + hv * VD + col, vraw);
#endif
  __syncthreads();
  // the state stays packed in raw[] (16 registers) and is unpacked twice, to keep occupancy up for bf16
  float sk[VEC], sq[VEC];
#pragma unroll
  for (int c = 0; c < VEC; ++c) sk[c] = sq[c] = 0.f;
#pragma unroll
  for (int p = 0; p < PASSES; ++p) {
    float s[VEC];
    unpack_state(raw[p], s);
    const float kr = ks[rg + RG * p], qr = qs[rg + RG * p];
#pragma unroll
    for (int c = 0; c < VEC; ++c) { sk[c] += s[c] * kr; sq[c] += s[c] * qr; }
  }
  warp_sum_pairs<TPR>(sk, sq);
#pragma unroll
  for (int c = 0; c < VEC; ++c) {
    if (lane < TPR) { red[warp][0][cg * VEC + c] = sk[c]; red[warp][1][cg * VEC + c] = sq[c]; }
  }
#if LEAN
  // LEAN: v is read only now, and o is stored before the update, so neither holds registers across the passes
  u32 vraw[VEC / 2];
  load_v(v + n * s_v + hv * VD + col, vraw);
#endif
  __syncthreads();
  const float decay = scal[1];
  float d[VEC], out[VEC];
  delta_columns(red, cg, vraw, scal, d, out);
#if LEAN
  if (rg == 0) store_o(o + ((long long)n * HV + hv) * VD + col, out);
  // an empty asm "rewrites" the packed state, so the compiler cannot keep the first pass's unpacked floats (32
  // registers) alive until the update; the bytes stay packed (16 registers) and are unpacked again below
#pragma unroll
  for (int p = 0; p < PASSES; ++p) opaque(raw[p]);
#endif
#pragma unroll
  for (int p = 0; p < PASSES; ++p) {
    const float kr = ks[rg + RG * p];
    float s[VEC];
    unpack_state(raw[p], s);
#pragma unroll
    for (int c = 0; c < VEC; ++c) s[c] = decay * s[c] + kr * d[c];
    raw_t w;
    pack_state(s, w);
    *reinterpret_cast<raw_t*>(S + (rg + RG * p) * VD) = w;
  }
#if !LEAN
  if (rg == 0) store_o(o + ((long long)n * HV + hv) * VD + col, out);
#endif
}
