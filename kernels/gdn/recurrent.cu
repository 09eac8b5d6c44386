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
// gdn_recurrent_decode_cp (CP_THREADS 128 or 256 threads): the block's [128, BV] tile (16 KB; BV = 128 bytes
//   of columns) goes to shared memory with cp.async, so bytes in flight no longer cost registers; thread t
//   then reads 16-byte pieces (columns (t % 8)*E16.., rows t/8 + RG*p) from shared memory and stores the new
//   state straight from registers. Measured slower than the register kernels (NOTES.md, v4); kept selectable.
#include "gdn_common.cuh"

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

// ---- gdn_recurrent_decode_cp: the state tile through shared memory (cp.async), same arguments and math ----
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
  const float kq = scal[0], decay = scal[1], beta = scal[2];
  float d[E16], out[E16];
#pragma unroll
  for (int c = 0; c < E16; ++c) {
    float tk = 0.f, tq = 0.f;
#pragma unroll
    for (int w = 0; w < CP_NWARP; ++w) { tk += red[w][0][cg * E16 + c]; tq += red[w][1][cg * E16 + c]; }
    const float vc = (c & 1) ? bfhi(vraw[c >> 1]) : bflo(vraw[c >> 1]);
    d[c] = beta * (vc - decay * tk);
    out[c] = decay * tq + d[c] * kq;
  }
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
