// chunk_state.cu: the sequential pass of the chunked Gated DeltaNet prefill (after gdn_chunk_prep, chunk.cu).
// Grid (V / 64, HV, N), block 256 (8 warps). Block (vt, hv, n) walks sequence n's 64-token chunks in order,
// holding state columns [64 vt, 64 vt + 64) of S [K=128, V] as f32 MMA accumulators (warp w: rows 16w..16w+15).
// Per chunk, with qn, kn the normalised fp16 inputs and gc the in-chunk cumsum of g:
//   step 1  R = beta v - (beta e^{gc} kn) S,  O = (e^{gc} qn) S    warp w: rows 16(w%4).., cols 32(w/4)..
//   step 2  v_new = T R                                            (T = (I + A)^-1 from the prep kernel)
//   step 3  O += P v_new  -> o
//   step 4  S = e^{gc_last} S + (e^{gc_last - gc} kn)^T v_new    (model-spec 3.1, fla chunk_delta_h)
// The next chunk's inputs are loaded into registers (Raw) while the current one computes.
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

struct Raw {
  uint4 q[4], k[4], t[2], p[2], v[2];
  float gq[4], bq[4], gl, b1;
};

struct Ptrs {
  const u16 *qn, *kn, *v, *tmat, *pmat;
  const float *gc, *beta;
  long long s_v;
  int H, HV, h, hv, v0;
};

__device__ __forceinline__ void load_raw(Raw& r, const Ptrs& P, int4 ch, int chunk) {
  const int tid = threadIdx.x, t0 = ch.y, len = ch.z;
  const uint4 z = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int e = tid + NTH * i, row = e >> 4, c8 = (e & 15) * 8;
    const bool ok = row < len;
    const long long off = ((long long)(t0 + row) * P.H + P.h) * KD + c8;
    r.q[i] = ok ? *reinterpret_cast<const uint4*>(P.qn + off) : z;
    r.k[i] = ok ? *reinterpret_cast<const uint4*>(P.kn + off) : z;
    r.gq[i] = ok ? P.gc[(long long)(t0 + row) * P.HV + P.hv] : 0.f;
    r.bq[i] = ok ? P.beta[(long long)(t0 + row) * P.HV + P.hv] : 0.f;
  }
  const long long mat = ((long long)chunk * P.HV + P.hv) * BT * BT;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int e = tid + NTH * i, row = e >> 3, c8 = (e & 7) * 8;
    r.t[i] = *reinterpret_cast<const uint4*>(P.tmat + mat + row * BT + c8);
    r.p[i] = *reinterpret_cast<const uint4*>(P.pmat + mat + row * BT + c8);
    r.v[i] = row < len ? *reinterpret_cast<const uint4*>(P.v + (t0 + row) * P.s_v + P.hv * VD + P.v0 + c8) : z;
  }
  r.gl = P.gc[(long long)(t0 + len - 1) * P.HV + P.hv];
  r.b1 = tid < len ? P.beta[(long long)(t0 + tid) * P.HV + P.hv] : 0.f;
}

__device__ __forceinline__ uint4 scale_h8(const uint4& u, float s) {
  return make_uint4(pack_h2(hlo(u.x) * s, hhi(u.x) * s), pack_h2(hlo(u.y) * s, hhi(u.y) * s),
                    pack_h2(hlo(u.z) * s, hhi(u.z) * s), pack_h2(hlo(u.w) * s, hhi(u.w) * s));
}

__device__ __forceinline__ void stage(const Raw& r, u16* Qd, u16* Kd, u16* Kt, u16* Ts, u16* Ps, u16* Vr,
                                      float* bs, float* sc) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int e = tid + NTH * i, row = e >> 4, c8 = (e & 15) * 8;
    const float eg = __expf(r.gq[i]);
    *reinterpret_cast<uint4*>(Qd + row * LDK + c8) = scale_h8(r.q[i], eg);
    *reinterpret_cast<uint4*>(Kd + row * LDK + c8) = scale_h8(r.k[i], r.bq[i] * eg);
    *reinterpret_cast<uint4*>(Kt + row * LDK + c8) = scale_h8(r.k[i], __expf(r.gl - r.gq[i]));
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int e = tid + NTH * i, row = e >> 3, c8 = (e & 7) * 8;
    *reinterpret_cast<uint4*>(Ts + row * LDT + c8) = r.t[i];
    *reinterpret_cast<uint4*>(Ps + row * LDT + c8) = r.p[i];
    *reinterpret_cast<uint4*>(Vr + row * LDV + c8) = r.v[i];
  }
  if (tid < BT) bs[tid] = r.b1;
  if (tid == 0) sc[0] = __expf(r.gl);
}

// acc fragment (rows m0 + g (+8), cols n0 + 8 nt + 2t (+1)) -> fp16 matrix in shared memory
template <int NT>
__device__ __forceinline__ void store_h(const float (&acc)[NT][4], u16* M, int ld, int m0, int n0) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    *reinterpret_cast<u32*>(M + (m0 + g) * ld + n0 + 8 * nt + 2 * t) = pack_h2(acc[nt][0], acc[nt][1]);
    *reinterpret_cast<u32*>(M + (m0 + g + 8) * ld + n0 + 8 * nt + 2 * t) = pack_h2(acc[nt][2], acc[nt][3]);
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

struct Smem {
  u16 *Qd, *Kd, *Kt, *Ts, *Ps, *Vr, *Rs, *Vn, *S16;
  float *bs, *sc;
};

// Steps 1-4 for one staged chunk; o rows < len written to o_row0 [len, HV, V] (token stride HV*V).
__device__ __forceinline__ void chunk_step(float (&S)[8][4], const Smem& m, int len, out_t* o_row0, long long s_o) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int m0 = 16 * (warp & 3), n0 = 32 * (warp >> 2);
  float accR[4][4], accO[4][4];
  zero_acc(accR);
  zero_acc(accO);
  warp_mma<4, KD, false, true>(accR, m.Kd, LDK, m0, m.S16, LDV, n0);
  warp_mma<4, KD, false, true>(accO, m.Qd, LDK, m0, m.S16, LDV, n0);
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i = m0 + g + 8 * hf, c = n0 + 8 * nt + 2 * t;
      const u32 vw = *reinterpret_cast<const u32*>(m.Vr + i * LDV + c);
      accR[nt][2 * hf] = m.bs[i] * bflo(vw) - accR[nt][2 * hf];
      accR[nt][2 * hf + 1] = m.bs[i] * bfhi(vw) - accR[nt][2 * hf + 1];
    }
  }
  store_h(accR, m.Rs, LDV, m0, n0);
  __syncthreads();
  zero_acc(accR);
  warp_mma<4, BT, false, true>(accR, m.Ts, LDT, m0, m.Rs, LDV, n0);
  store_h(accR, m.Vn, LDV, m0, n0);
  __syncthreads();
  warp_mma<4, BT, false, true>(accO, m.Ps, LDT, m0, m.Vn, LDV, n0);
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i = m0 + g + 8 * hf, c = n0 + 8 * nt + 2 * t;
      if (i < len)
        st_out2(o_row0 + i * s_o + c, accO[nt][2 * hf], accO[nt][2 * hf + 1]);
    }
  }
  const float el = m.sc[0];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) S[nt][e] *= el;
  warp_mma<8, BT, true, true>(S, m.Kt, LDK, 16 * warp, m.Vn, LDV, 0);
  store_h(S, m.S16, LDV, 16 * warp, 0);
}

// Workspace from gdn_chunk_prep; v [T, HV, V] bf16 (token stride s_v); pool [S, HV, K, V] state_t in place (slot stride s_slot);
// slot_ids [N] (< 0: zero initial state, final state dropped); has_init [N] int32; chunks [num_chunks, 4];
// seq_chunks [N+1] int32 (first chunk of each sequence); o [T, HV, V] out_t (bf16; f32 with OUT_F32) contiguous.
extern "C" __global__ void __launch_bounds__(NTH, 1)
gdn_chunk_state(const u16* __restrict__ qn_ws, const u16* __restrict__ kn_ws, const u16* __restrict__ v,
                long long s_v, const float* __restrict__ gc_ws, const float* __restrict__ beta_ws,
                const u16* __restrict__ tmat_ws, const u16* __restrict__ pmat_ws, state_t* __restrict__ pool, long long s_slot,
                const int* __restrict__ slot_ids, const int* __restrict__ has_init, const int* __restrict__ chunks,
                const int* __restrict__ seq_chunks, out_t* __restrict__ o, int H, int HV) {
  extern __shared__ __align__(16) unsigned char smem[];
  Smem m;
  m.Qd = reinterpret_cast<u16*>(smem);
  m.Kd = m.Qd + BT * LDK;
  m.Kt = m.Kd + BT * LDK;
  m.Ts = m.Kt + BT * LDK;
  m.Ps = m.Ts + BT * LDT;
  m.Vr = m.Ps + BT * LDT;
  m.Rs = m.Vr + BT * LDV;
  m.Vn = m.Rs + BT * LDV;
  m.S16 = m.Vn + BT * LDV;
  m.bs = reinterpret_cast<float*>(m.S16 + KD * LDV);
  m.sc = m.bs + BT;
  const int n = blockIdx.z, hv = blockIdx.y, v0 = blockIdx.x * BVS, slot = slot_ids[n];
  const Ptrs P = {qn_ws, kn_ws, v, tmat_ws, pmat_ws, gc_ws, beta_ws, s_v, H, HV, hv / (HV / H), hv, v0};
  state_t* st = pool + (long long)(slot < 0 ? 0 : slot) * s_slot + (long long)hv * (KD * VD) + v0;
  float S[8][4];
  load_state(S, st, slot >= 0 && has_init[n] != 0, m.S16);
  const int c_begin = seq_chunks[n], c_end = seq_chunks[n + 1];
  const int4* ch4 = reinterpret_cast<const int4*>(chunks);
  Raw raw;
  if (c_begin < c_end) load_raw(raw, P, ch4[c_begin], c_begin);
  for (int c = c_begin; c < c_end; ++c) {
    const int4 ch = ch4[c];
    __syncthreads();
    stage(raw, m.Qd, m.Kd, m.Kt, m.Ts, m.Ps, m.Vr, m.bs, m.sc);
    if (c + 1 < c_end) load_raw(raw, P, ch4[c + 1], c + 1);
    __syncthreads();
    chunk_step(S, m, ch.z, o + ((long long)ch.y * HV + hv) * VD + v0, (long long)HV * VD);
  }
  if (slot >= 0) save_state(S, st);
}
