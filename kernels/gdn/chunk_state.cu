// chunk_state.cu: the sequential pass of the chunked Gated DeltaNet prefill (after gdn_chunk_prep, chunk.cu).
// Grid (V / 64, HV, N), block 256 (8 warps), 1 block per SM (~168 KB shared memory).
// Block (vt, hv, n) walks sequence n's 64-token chunks in order, holding state columns [64 vt, 64 vt + 64) of
// S [K=128, V] as f32 MMA accumulators (warp w: rows 16w..16w+15). With qn, kn the normalised fp16 inputs and
// gc the in-chunk cumsum of g, the diagonal decays are applied to accumulator rows, not to operands:
//   step 1  X = kn S, O = qn S;  R = beta (v - e^{gc} X);  O = e^{gc} O   warp w: rows 16(w%4).., cols 32(w/4)..
//   step 2  v_new = T R  (T = (I + A)^-1 from the prep kernel);  v_end = e^{gc_last - gc} v_new
//   step 3  O += P v_new  -> o
//   step 4  S = e^{gc_last} S + kn^T v_end      (model-spec 3.1, fla chunk_delta_h / chunk_fwd_o)
// Inputs of chunk c+1 stream into the second shared-memory buffer with cp.async while chunk c computes.
#include "gdn_common.cuh"

#define BT 64
#define KD 128
#define VD 128
#define LDK (KD + 8)
#define LDT (BT + 8)
#define BVS 64
#define LDV (BVS + 8)
#define NTH 256

#if STATE_BF16
typedef u16 state_t;
__device__ __forceinline__ float2 ld_state2(const state_t* p) {
  const u32 w = *reinterpret_cast<const u32*>(p);
  return make_float2(bflo(w), bfhi(w));
}
__device__ __forceinline__ void st_state2(state_t* p, float x, float y) { *reinterpret_cast<u32*>(p) = pack_bf2(x, y); }
#else
typedef float state_t;
__device__ __forceinline__ float2 ld_state2(const state_t* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ void st_state2(state_t* p, float x, float y) {
  *reinterpret_cast<float2*>(p) = make_float2(x, y);
}
#endif

// One input buffer: qn, kn [64][LDK], T, P [64][LDT] fp16; v [64][LDV] bf16; gc, beta [64] f32.
#define BUF_HALVES (2 * BT * LDK + 2 * BT * LDT + BT * LDV)
#define BUF_BYTES (BUF_HALVES * 2 + 2 * BT * 4)

struct Buf {
  u16 *qn, *kn, *t, *p, *v;
  float *gc, *beta;
};

__device__ __forceinline__ Buf buf_at(unsigned char* base) {
  Buf b;
  b.qn = reinterpret_cast<u16*>(base);
  b.kn = b.qn + BT * LDK;
  b.t = b.kn + BT * LDK;
  b.p = b.t + BT * LDT;
  b.v = b.p + BT * LDT;
  b.gc = reinterpret_cast<float*>(b.v + BT * LDV);
  b.beta = b.gc + BT;
  return b;
}

struct Src {
  const u16 *qn, *kn, *v, *tmat, *pmat;
  const float *gc, *beta;
  long long s_v;
  int H, HV, h, hv, v0;
};

// Issue the cp.async copies of one chunk (rows >= len zero-filled).
__device__ __forceinline__ void issue_chunk(const Buf& b, const Src& s, int4 ch, int chunk) {
  const int tid = threadIdx.x, t0 = ch.y, len = ch.z;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int e = tid + NTH * i, row = e >> 4, c8 = (e & 15) * 8;
    const long long off = ((long long)(t0 + (row < len ? row : 0)) * s.H + s.h) * KD + c8;
    cp_async16(b.qn + row * LDK + c8, s.qn + off, row < len);
    cp_async16(b.kn + row * LDK + c8, s.kn + off, row < len);
  }
  const long long mat = ((long long)chunk * s.HV + s.hv) * BT * BT;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int e = tid + NTH * i, row = e >> 3, c8 = (e & 7) * 8;
    cp_async16(b.t + row * LDT + c8, s.tmat + mat + row * BT + c8, true);
    cp_async16(b.p + row * LDT + c8, s.pmat + mat + row * BT + c8, true);
    const long long voff = (long long)(t0 + (row < len ? row : 0)) * s.s_v + s.hv * VD + s.v0 + c8;
    cp_async16(b.v + row * LDV + c8, s.v + voff, row < len);
  }
  if (tid < 2 * BT) {
    const int row = tid & (BT - 1);
    const long long goff = (long long)(t0 + (row < len ? row : 0)) * s.HV + s.hv;
    if (tid < BT) cp_async4(b.gc + row, s.gc + goff, row < len);
    else cp_async4(b.beta + row, s.beta + goff, row < len);
  }
}

// acc fragment (rows m0 + g (+8), cols n0 + 8 nt + 2t (+1)), rows scaled by rs[0] / rs[1] -> fp16 shared matrix
template <int NT>
__device__ __forceinline__ void store_h(const float (&acc)[NT][4], u16* M, int ld, int m0, int n0, float r0 = 1.f,
                                        float r1 = 1.f) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    *reinterpret_cast<u32*>(M + (m0 + g) * ld + n0 + 8 * nt + 2 * t) = pack_h2(acc[nt][0] * r0, acc[nt][1] * r0);
    *reinterpret_cast<u32*>(M + (m0 + g + 8) * ld + n0 + 8 * nt + 2 * t) = pack_h2(acc[nt][2] * r1, acc[nt][3] * r1);
  }
}

// Initial state (or zeros) into the accumulators; writes the fp16 copy S16 for step 1.
__device__ __forceinline__ void load_state(float (&S)[8][4], const state_t* src, bool init, u16* S16) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int row = 16 * warp + g + 8 * hf, col = 8 * nt + 2 * t;
      const float2 x = init ? ld_state2(src + row * VD + col) : make_float2(0.f, 0.f);
      S[nt][2 * hf] = x.x;
      S[nt][2 * hf + 1] = x.y;
    }
  }
  store_h(S, S16, LDV, 16 * warp, 0);
}

__device__ __forceinline__ void save_state(const float (&S)[8][4], state_t* dst) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
      st_state2(dst + (16 * warp + g + 8 * hf) * VD + 8 * nt + 2 * t, S[nt][2 * hf], S[nt][2 * hf + 1]);
}

struct Work {
  u16 *rs, *vn, *ve, *s16;
};

// Steps 1-4 for one chunk in buffer b; o rows < len written to o_row0 (token stride s_o).
__device__ __forceinline__ void chunk_step(float (&S)[8][4], const Buf& b, const Work& w, int len, out_t* o_row0,
                                           long long s_o) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int m0 = 16 * (warp & 3), n0 = 32 * (warp >> 2), i0 = m0 + g, i1 = i0 + 8;
  const float gl = b.gc[len - 1];
  const float eg0 = __expf(b.gc[i0]), eg1 = __expf(b.gc[i1]);
  float accX[4][4], accO[4][4];
  zero_acc(accX);
  zero_acc(accO);
  warp_mma2<4, KD, true>(accX, accO, b.kn, b.qn, LDK, m0, w.s16, LDV, n0);
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    const int c = n0 + 8 * nt + 2 * t;
    const u32 v0 = *reinterpret_cast<const u32*>(b.v + i0 * LDV + c);
    const u32 v1 = *reinterpret_cast<const u32*>(b.v + i1 * LDV + c);
    accX[nt][0] = b.beta[i0] * (bflo(v0) - eg0 * accX[nt][0]);
    accX[nt][1] = b.beta[i0] * (bfhi(v0) - eg0 * accX[nt][1]);
    accX[nt][2] = b.beta[i1] * (bflo(v1) - eg1 * accX[nt][2]);
    accX[nt][3] = b.beta[i1] * (bfhi(v1) - eg1 * accX[nt][3]);
    accO[nt][0] *= eg0; accO[nt][1] *= eg0; accO[nt][2] *= eg1; accO[nt][3] *= eg1;
  }
  store_h(accX, w.rs, LDV, m0, n0);
  __syncthreads();
  zero_acc(accX);
  warp_mma<4, BT, false, true>(accX, b.t, LDT, m0, w.rs, LDV, n0);
  store_h(accX, w.vn, LDV, m0, n0);
  store_h(accX, w.ve, LDV, m0, n0, __expf(gl - b.gc[i0]), __expf(gl - b.gc[i1]));
  __syncthreads();
  warp_mma<4, BT, false, true>(accO, b.p, LDT, m0, w.vn, LDV, n0);
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    const int c = n0 + 8 * nt + 2 * t;
    if (i0 < len) st_out2(o_row0 + i0 * s_o + c, accO[nt][0], accO[nt][1]);
    if (i1 < len) st_out2(o_row0 + i1 * s_o + c, accO[nt][2], accO[nt][3]);
  }
  const float el = __expf(gl);
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) S[nt][e] *= el;
  warp_mma<8, BT, true, true>(S, b.kn, LDK, 16 * warp, w.ve, LDV, 0);
  store_h(S, w.s16, LDV, 16 * warp, 0);
}

// Workspace from gdn_chunk_prep; v [T, HV, V] bf16 (token stride s_v); pool [S, HV, K, V] state_t in place
// (slot stride s_slot); slot_ids [N] (< 0: zero initial state, final state dropped); has_init [N] int32;
// chunks [num_chunks, 4]; seq_chunks [N+1] int32 (first chunk of each sequence);
// o [T, HV, V] out_t (bf16; f32 with OUT_F32) contiguous.
extern "C" __global__ void __launch_bounds__(NTH, 1)
gdn_chunk_state(const u16* __restrict__ qn_ws, const u16* __restrict__ kn_ws, const u16* __restrict__ v,
                long long s_v, const float* __restrict__ gc_ws, const float* __restrict__ beta_ws,
                const u16* __restrict__ tmat_ws, const u16* __restrict__ pmat_ws, state_t* __restrict__ pool,
                long long s_slot, const int* __restrict__ slot_ids, const int* __restrict__ has_init,
                const int* __restrict__ chunks, const int* __restrict__ seq_chunks, out_t* __restrict__ o, int H,
                int HV) {
  extern __shared__ __align__(16) unsigned char smem[];
  Work w;
  w.rs = reinterpret_cast<u16*>(smem + 2 * BUF_BYTES);
  w.vn = w.rs + BT * LDV;
  w.ve = w.vn + BT * LDV;
  w.s16 = w.ve + BT * LDV;
  const int n = blockIdx.z, hv = blockIdx.y, v0 = blockIdx.x * BVS, slot = slot_ids[n];
  const Src src = {qn_ws, kn_ws, v, tmat_ws, pmat_ws, gc_ws, beta_ws, s_v, H, HV, hv / (HV / H), hv, v0};
  state_t* st = pool + (long long)(slot < 0 ? 0 : slot) * s_slot + (long long)hv * (KD * VD) + v0;
  float S[8][4];
  load_state(S, st, slot >= 0 && has_init[n] != 0, w.s16);
  const int c_begin = seq_chunks[n], c_end = seq_chunks[n + 1];
  const int4* ch4 = reinterpret_cast<const int4*>(chunks);
  if (c_begin < c_end) issue_chunk(buf_at(smem), src, ch4[c_begin], c_begin);
  cp_async_commit();
  for (int c = c_begin; c < c_end; ++c) {
    const int4 ch = ch4[c];
    const Buf b = buf_at(smem + ((c - c_begin) & 1) * BUF_BYTES);
    __syncthreads();
    if (c + 1 < c_end) issue_chunk(buf_at(smem + ((c + 1 - c_begin) & 1) * BUF_BYTES), src, ch4[c + 1], c + 1);
    cp_async_commit();
    cp_async_wait1();
    __syncthreads();
    chunk_step(S, b, w, ch.z, o + ((long long)ch.y * HV + hv) * VD + v0, (long long)HV * VD);
  }
  if (slot >= 0) save_state(S, st);
}
