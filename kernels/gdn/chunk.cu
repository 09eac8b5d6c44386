// chunk.cu: chunked (BT = 64, WY/UT form) Gated DeltaNet prefill over packed varlen sequences, 2 kernels.
// gdn_chunk_prep: grid (num_chunks, H, Z), block 128 (4 warps). Per chunk and key head h: l2-normalise q, k
//   (fp16 copies qn, kn to workspace, by the z = 0 block), Gkk = kn kn^T and Gqk = qn kn^T on tensor cores (warp
//   w: rows 16w..), then for each of block z's share of the HV/H value heads (group r in [z G / Z, (z + 1) G / Z):
//   Z > 1 spreads a short prefill over more SMs, each block recomputing the Gram matrices): gates g, beta from
//   raw a, b; gc = cumsum(g) in the chunk;
//   A = strict_lower(beta_i Gkk_ij e^{gc_i-gc_j}); T = (I + A)^-1 (16x16 diagonal blocks by forward
//   substitution, then off-diagonal blocks by distance, T_IJ = -T_II sum_K A_IK T_KJ, as fla's solve_tril);
//   P = lower(Gqk_ij e^{gc_i-gc_j}). Writes gc, beta [T, HV] f32 and T, P [num_chunks, HV, 64, 64] fp16.
// gdn_chunk_state: grid (V / 64, HV, N), block 256 (8 warps). Block (vt, hv, n) walks sequence n's chunks in
//   order, holding state columns [64 vt, 64 vt + 64) in registers (warp w: rows 16w.., f32 MMA accumulators):
//   R = beta v - (beta e^{gc} kn) S;  v_new = T R;  o = (e^{gc} qn) S + P v_new;
//   S = e^{gc_last} S + (e^{gc_last - gc} kn)^T v_new   (model-spec 3.1 steps 4-6, fla chunk_delta_h).
//   The next chunk's inputs are loaded into registers while the current one computes.
// All matmuls: mma.sync m16n8k16 fp16 x fp16 -> f32 (fp16 keeps 11 significant bits, as tf32 does).
#include "gdn_common.cuh"

#define BT 64
#define KD 128
#define VD 128
#define LDK (KD + 8)
#define LDT (BT + 8)
#define LDF (BT + 1)
#define GROUP_MAX 8
#ifndef PREP_MIN_BLOCKS
#define PREP_MIN_BLOCKS 5
#endif

// Warp w normalises rows 16w..16w+15 of q (times scale) and k into Qs/Ks (fp16) and, its first ws_len rows,
// the workspace.
__device__ __forceinline__ void prep_load_qk(const u16* q, const u16* k, long long s_qk, int t0, int len, int h,
                                             int H, float scale, u16* Qs, u16* Ks, u16* qn_ws, u16* kn_ws,
                                             int ws_len) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int i = 16 * warp + r;
    uint2 qu = make_uint2(0u, 0u), ku = qu;
    if (i < len) {
      qu = *reinterpret_cast<const uint2*>(q + (t0 + i) * s_qk + h * KD + 4 * lane);
      ku = *reinterpret_cast<const uint2*>(k + (t0 + i) * s_qk + h * KD + 4 * lane);
    }
    float qv[4] = {bflo(qu.x), bfhi(qu.x), bflo(qu.y), bfhi(qu.y)};
    float kv[4] = {bflo(ku.x), bfhi(ku.x), bflo(ku.y), bfhi(ku.y)};
    float sq = 0.f, sk = 0.f;
#pragma unroll
    for (int e = 0; e < 4; ++e) { sq += qv[e] * qv[e]; sk += kv[e] * kv[e]; }
    const float rq = rsqrtf(warp_sum(sq) + GDN_L2_EPS) * scale, rk = rsqrtf(warp_sum(sk) + GDN_L2_EPS);
    const uint2 qh = make_uint2(pack_h2(qv[0] * rq, qv[1] * rq), pack_h2(qv[2] * rq, qv[3] * rq));
    const uint2 kh = make_uint2(pack_h2(kv[0] * rk, kv[1] * rk), pack_h2(kv[2] * rk, kv[3] * rk));
    *reinterpret_cast<uint2*>(Qs + i * LDK + 4 * lane) = qh;
    *reinterpret_cast<uint2*>(Ks + i * LDK + 4 * lane) = kh;
    if (i < ws_len) {
      const long long off = ((long long)(t0 + i) * H + h) * KD + 4 * lane;
      *reinterpret_cast<uint2*>(qn_ws + off) = qh;
      *reinterpret_cast<uint2*>(kn_ws + off) = kh;
    }
  }
}

// All threads: g and beta of the chunk's rows for the group's value heads into shared memory (0 past len).
__device__ __forceinline__ void prep_gate_inputs(const u16* a, const u16* b, long long s_ab, const float* a_log,
                                                 const float* dt_bias, int t0, int len, int hv0, int group,
                                                 float* graw, float* braw) {
  for (int e = threadIdx.x; e < group * BT; e += blockDim.x) {
    const int r = e / BT, i = e % BT, hv = hv0 + r;
    float g = 0.f, be = 0.f;
    if (i < len) {
      const long long row = (long long)(t0 + i) * s_ab + hv;
      g = gdn_gate(bf2f(a[row]), a_log[hv], dt_bias[hv]);
      be = sigmoidf_(bf2f(b[row]));
    }
    graw[e] = g;
    braw[e] = be;
  }
}

// Warp 0: inclusive cumsum of g over the chunk (lane: rows 2l, 2l+1) into gcs, beta into bs, both to workspace.
__device__ __forceinline__ void prep_gates(const float* graw, const float* braw, int t0, int len, int hv, int HV,
                                           float* gcs, float* bs, float* gc_ws, float* beta_ws) {
  const int lane = threadIdx.x & 31, i0 = 2 * lane;
  const float g0 = graw[i0], g1 = graw[i0 + 1];
  float s = g0 + g1;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, s, o);
    if (lane >= o) s += y;
  }
  const float gc[2] = {s - g1, s};
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    gcs[i0 + e] = gc[e];
    bs[i0 + e] = braw[i0 + e];
    if (i0 + e < len) {
      gc_ws[(long long)(t0 + i0 + e) * HV + hv] = gc[e];
      beta_ws[(long long)(t0 + i0 + e) * HV + hv] = braw[i0 + e];
    }
  }
}

// From the Gram accumulators (warp w: rows 16w.., 8 column tiles): A (f32, smem) and P (fp16, workspace).
__device__ __forceinline__ void prep_masks(const float (&akk)[8][4], const float (&aqk)[8][4], const float* gcs,
                                           const float* bs, float* As, u16* pmat) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i = 16 * warp + (lane >> 2) + 8 * hf, c = 8 * nt + 2 * (lane & 3);
      float p[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = c + e;
        const float dec = j <= i ? __expf(gcs[i] - gcs[j]) : 0.f;
        As[i * LDF + j] = j < i ? bs[i] * akk[nt][2 * hf + e] * dec : 0.f;
        p[e] = aqk[nt][2 * hf + e] * dec;
      }
      *reinterpret_cast<u32*>(pmat + i * BT + c) = pack_h2(p[0], p[1]);
    }
  }
}

// T = (I + A)^-1, A strictly lower [64][LDF] f32, by 16x16 blocks (all 128 threads). Diagonal blocks: thread c
// substitutes column c down its block. Off-diagonal (I > J) by distance d = I - J: X_IJ = sum_{J<=K<I} A_IK T_KJ
// (kept in the unused upper block (J, I) of Ts), then T_IJ = -T_II X_IJ. Ts's upper triangle is scratch.
__device__ __forceinline__ void invert_blocked(const float* As, float* Ts) {
  const int tid = threadIdx.x;
  if (tid < BT) {
    const int c = tid, b0 = c & ~15;
    for (int i = b0; i < b0 + 16; ++i) Ts[i * LDF + c] = i == c ? 1.f : 0.f;
    for (int i = c + 1; i < b0 + 16; ++i) {
      float s = 0.f;
      for (int j = c; j < i; ++j) s += As[i * LDF + j] * Ts[j * LDF + c];
      Ts[i * LDF + c] = -s;
    }
  }
  __syncthreads();
  for (int d = 1; d < 4; ++d) {
    const int nel = (4 - d) * 256;
    for (int e = tid; e < nel; e += blockDim.x) {
      const int J = e >> 8, I = J + d, r = (e >> 4) & 15, cc = e & 15, i = 16 * I + r, c = 16 * J + cc;
      float s0 = 0.f, s1 = 0.f;
      for (int k = 16 * J; k < 16 * I; k += 2) {
        s0 += As[i * LDF + k] * Ts[k * LDF + c];
        s1 += As[i * LDF + k + 1] * Ts[(k + 1) * LDF + c];
      }
      Ts[(16 * J + r) * LDF + 16 * I + cc] = s0 + s1;
    }
    __syncthreads();
    for (int e = tid; e < nel; e += blockDim.x) {
      const int J = e >> 8, I = J + d, r = (e >> 4) & 15, cc = e & 15;
      float s = 0.f;
#pragma unroll
      for (int m = 0; m < 16; ++m) s += Ts[(16 * I + r) * LDF + 16 * I + m] * Ts[(16 * J + m) * LDF + 16 * I + cc];
      Ts[(16 * I + r) * LDF + 16 * J + cc] = -s;
    }
    __syncthreads();
  }
}

// q, k [T, H, K] bf16 (token stride s_qk); a, b [T, HV] bf16 (token stride s_ab); a_log, dt_bias [HV] f32;
// chunks [num_chunks, 4] int32 (seq, first token, length, index in seq). Workspace outputs as in the header.
extern "C" __global__ void __launch_bounds__(128, PREP_MIN_BLOCKS)
gdn_chunk_prep(const u16* __restrict__ q, const u16* __restrict__ k, long long s_qk, const u16* __restrict__ a,
               const u16* __restrict__ b, long long s_ab, const float* __restrict__ a_log,
               const float* __restrict__ dt_bias, const int* __restrict__ chunks, u16* __restrict__ qn_ws,
               u16* __restrict__ kn_ws, float* __restrict__ gc_ws, float* __restrict__ beta_ws,
               u16* __restrict__ tmat_ws, u16* __restrict__ pmat_ws, int H, int HV, float scale) {
  extern __shared__ __align__(16) unsigned char smem[];
  // As/Ts overlay Qs/Ks: the Gram matrices live in registers once computed (the first sync in the head loop
  // orders every warp's last read of Qs/Ks before the first write of As). 39 KB -> 5 blocks per SM.
  u16* Qs = reinterpret_cast<u16*>(smem);
  u16* Ks = Qs + BT * LDK;
  float* As = reinterpret_cast<float*>(smem);
  float* Ts = As + BT * LDF;
  float* gcs = reinterpret_cast<float*>(Ks + BT * LDK);
  float* bs = gcs + BT;
  float* graw = bs + BT;
  float* braw = graw + GROUP_MAX * BT;
  const int chunk = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, warp = tid >> 5;
  const int4 ch = reinterpret_cast<const int4*>(chunks)[chunk];
  const int t0 = ch.y, len = ch.z, group = HV / H, z = blockIdx.z;
  // this block's value heads [hv0, hv_end)
  const int hv0 = h * group + group * z / (int)gridDim.z, hv_end = h * group + group * (z + 1) / (int)gridDim.z;
  prep_gate_inputs(a, b, s_ab, a_log, dt_bias, t0, len, hv0, hv_end - hv0, graw, braw);
  prep_load_qk(q, k, s_qk, t0, len, h, H, scale, Qs, Ks, qn_ws, kn_ws, z == 0 ? len : 0);  // z = 0 writes qn, kn
  __syncthreads();
  float akk[8][4], aqk[8][4];
  zero_acc(akk);
  zero_acc(aqk);
  warp_mma<8, KD, false, false>(akk, Ks, LDK, 16 * warp, Ks, LDK, 0);
  warp_mma<8, KD, false, false>(aqk, Qs, LDK, 16 * warp, Ks, LDK, 0);
  for (int hv = hv0; hv < hv_end; ++hv) {
    const int r = hv - hv0;
    const long long mat = ((long long)chunk * HV + hv) * BT * BT;
    if (warp == 0) prep_gates(graw + r * BT, braw + r * BT, t0, len, hv, HV, gcs, bs, gc_ws, beta_ws);
    __syncthreads();
    prep_masks(akk, aqk, gcs, bs, As, pmat_ws + mat);
    __syncthreads();
    invert_blocked(As, Ts);
    for (int e = 2 * tid; e < BT * BT; e += 2 * blockDim.x) {
      const int i = e / BT, j = e % BT;
      const float t0v = j <= i ? Ts[i * LDF + j] : 0.f, t1v = j + 1 <= i ? Ts[i * LDF + j + 1] : 0.f;
      *reinterpret_cast<u32*>(tmat_ws + mat + e) = pack_h2(t0v, t1v);
    }
  }
}
