// recurrent.cu: fused recurrent Gated DeltaNet decode, one token for each of N sequences, state in place.
// Grid (V / BV, HV, N), block 256 threads = 32 row groups x 8 column groups (TPR).
// Block (vt, hv, n) owns columns [vt*BV, vt*BV + BV) of pool[slot_ids[n], hv] (state [K=128, V=128] row-major).
// Thread t: columns vt*BV + (t % 8)*VEC .. +VEC (one 16-byte access), rows t/8 + 32*p for p < 4.
// STATE_BF16=0: f32 state, VEC 4, BV 32 (4 blocks per head); STATE_BF16=1: bf16 state, VEC 8, BV 64.
// One pass over the state: S^T k and S^T q are reduced together, since after the update
// o = S'^T q = e^g S^T q + d (k.q) with d = beta (v - e^g S^T k)  (model-spec 1.7 rearranged).
#include "gdn_common.cuh"

#define KD 128
#define VD 128
#define THREADS 256
#define TPR 8
#define RG (THREADS / TPR)
#define PASSES (KD / RG)
#define NWARP (THREADS / 32)

#if STATE_BF16
typedef u16 state_t;
#define VEC 8
#else
typedef float state_t;
#define VEC 4
#endif
// blocks per SM the register allocation must allow. bf16: 3 (77 registers) measured 43.6 us at N=32 against
// 50.7 us for 4 (64 registers + 24-byte spill); f32: 5 (48 registers, no spill).
#ifndef MIN_BLOCKS
#define MIN_BLOCKS (STATE_BF16 ? 3 : 5)
#endif
#define BV (TPR * VEC)

__device__ __forceinline__ void unpack_state(const uint4& u, float (&x)[VEC]) {
  const u32 w[4] = {u.x, u.y, u.z, u.w};
#if STATE_BF16
#pragma unroll
  for (int i = 0; i < 4; ++i) { x[2 * i] = bflo(w[i]); x[2 * i + 1] = bfhi(w[i]); }
#else
#pragma unroll
  for (int i = 0; i < 4; ++i) x[i] = __uint_as_float(w[i]);
#endif
}

__device__ __forceinline__ uint4 pack_state(const float (&x)[VEC]) {
#if STATE_BF16
  return make_uint4(pack_bf2(x[0], x[1]), pack_bf2(x[2], x[3]), pack_bf2(x[4], x[5]), pack_bf2(x[6], x[7]));
#else
  return make_uint4(__float_as_uint(x[0]), __float_as_uint(x[1]), __float_as_uint(x[2]), __float_as_uint(x[3]));
#endif
}

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
  const int slot = slot_ids[n];
  if (slot < 0) return;
  const int tid = threadIdx.x, cg = tid % TPR, rg = tid / TPR, lane = tid & 31, warp = tid >> 5;
  const int col = vt * BV + cg * VEC;
  state_t* S = pool + (long long)slot * s_slot + (long long)hv * (KD * VD) + col;
  uint4 raw[PASSES];
#pragma unroll
  for (int p = 0; p < PASSES; ++p) raw[p] = *reinterpret_cast<const uint4*>(S + (rg + RG * p) * VD);
  if (warp == 0) {
    const int h = hv / (HV / H);
    decode_prologue(q + n * s_qk + h * KD, k + n * s_qk + h * KD, bf2f(a[n * s_ab + hv]),
                    bf2f(b[n * s_ab + hv]), a_log[hv], dt_bias[hv], scale, qs, ks, scal);
  }
  // v kept packed (VEC bf16) until after the reduction
  u32 vraw[VEC / 2];
#pragma unroll
  for (int c = 0; c < VEC / 2; ++c) vraw[c] = *reinterpret_cast<const u32*>(v + n * s_v + hv * VD + col + 2 * c);
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
#pragma unroll
  for (int c = 0; c < VEC; ++c) {
#pragma unroll
    for (int m = TPR; m < 32; m <<= 1) {
      sk[c] += __shfl_xor_sync(0xffffffffu, sk[c], m);
      sq[c] += __shfl_xor_sync(0xffffffffu, sq[c], m);
    }
    if (lane < TPR) { red[warp][0][cg * VEC + c] = sk[c]; red[warp][1][cg * VEC + c] = sq[c]; }
  }
  __syncthreads();
  const float kq = scal[0], decay = scal[1], beta = scal[2];
  float d[VEC], out[VEC];
#pragma unroll
  for (int c = 0; c < VEC; ++c) {
    float tk = 0.f, tq = 0.f;
#pragma unroll
    for (int w = 0; w < NWARP; ++w) { tk += red[w][0][cg * VEC + c]; tq += red[w][1][cg * VEC + c]; }
    const float vc = (c & 1) ? bfhi(vraw[c >> 1]) : bflo(vraw[c >> 1]);
    d[c] = beta * (vc - decay * tk);
    out[c] = decay * tq + d[c] * kq;
  }
#pragma unroll
  for (int p = 0; p < PASSES; ++p) {
    const float kr = ks[rg + RG * p];
    float s[VEC];
    unpack_state(raw[p], s);
#pragma unroll
    for (int c = 0; c < VEC; ++c) s[c] = decay * s[c] + kr * d[c];
    *reinterpret_cast<uint4*>(S + (rg + RG * p) * VD) = pack_state(s);
  }
  if (rg == 0) {
    out_t* op = o + ((long long)n * HV + hv) * VD + col;
#pragma unroll
    for (int c = 0; c < VEC; c += 2) st_out2(op + c, out[c], out[c + 1]);
  }
}
