// decode_mma.cu: decode attention on tensor cores for long rows, where paged_decode.cu (CUDA-core scores, bound by
// its shared-memory and shuffle traffic: 44% of copy bandwidth at 64 rows x 32K keys) and torch (one row at 32K keys:
// 160 us for 128 MB of K / V) stay far from the bandwidth the step needs. Same arguments, math and split workspace
// as paged_decode (whose combine kernel merges the splits).
//
// Grid (S, nKV, Nd), block NW warps; block (s, h, n) takes keys [s L, min((s + 1) L, nk)) of row n (L = 16
// ceil(ceil(nk / 16) / S)) in chunks of 16 keys, chunk c to warp c % NW. Each warp streams its chunks' K and V rows
// (16 x HD bf16 each) through its own ring of NST shared-memory stages (cp.async, a warp instruction per whole row,
// piece p of key r stored at piece p ^ (r & 7) so ldmatrix's eight rows hit distinct banks; keys past the range
// zero-filled) and keeps its own online softmax; the NW warps merge at the end.
// Per chunk, with the G <= 8 query heads of kv head h as the n8 side of mma.m16n8k16 (bf16 in, f32 sums):
//   S^T [16 keys, 8 heads] = K [16, HD] Q^T: A = K by ldmatrix, B = q (registers, loaded once);
//   scores times scale * log2 e, online softmax per head in exp2 (lane (g, t) holds heads 2t, 2t + 1 for keys g,
//   g + 8: the head max is three shuffles), P rounded to bf16 (as flash-attention feeds P V);
//   O^T [HD, 8 heads] += V^T [HD, 16 keys] P^T: A = V by ldmatrix.trans, B = P^T by movmatrix.trans of the S^T
//   fragment; the accumulator's heads are the lane's softmax heads, so the rescale needs no shuffle.
// S = 1: out = O / l (bf16); else (O, m, l) to ws as paged_decode writes them.
// Sources: online softmax, Milakov & Gimelshein 2018; split keys, flash-decoding (Dao et al., 2023); P V with P from
// the score fragments, FlashAttention-2 (Dao, 2023); swizzled shared memory as CUTLASS lays it out.
#include "decode_common.cuh"

#ifndef NW
#define NW 4
#endif
#ifndef NST
#define NST 3
#endif
#define CK 16                              // keys a chunk
#define PIECES (HD / 8)                    // 16-byte pieces of a row
#define KPI (32 / PIECES)                  // keys one warp instruction copies
#define ROWB (HD * 2)                      // bytes of a row
#define STAGE_BYTES (2 * CK * ROWB)        // K then V rows of a chunk
#define KT (HD / 16)                       // k-steps of Q K^T, m-tiles of P V

__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// 16 bytes global -> shared; src_bytes 0 writes zeros (src is not read)
__device__ __forceinline__ void cp_async16(u32 dst, const void* src, u32 src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void ldsm_x4(u32 addr, u32 (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(u32 addr, u32 (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ u32 movmatrix_t(u32 a) {
  u32 d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a));
  return d;
}
__device__ __forceinline__ void mma16816(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ u32 pack_bf2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// the warp's copies of chunk [j0, j0 + 16) into stage `dst`: each instruction reads whole rows (KPI keys of PIECES
// 16-byte pieces: 512 contiguous bytes), so a chunk is 16 / KPI fully used row reads for K and as many for V; lane
// L looks up key L % 16's slot in the block table and the others read it by a shuffle
__device__ __forceinline__ void issue_chunk(const Args& a, int n, int h, int j0, int hi, u32 dst) {
  const int lane = threadIdx.x & 31, mj = j0 + (lane & 15), sub = lane / PIECES, piece = lane % PIECES;
  long long mine = 0;  // key mj's row offset (elements) in the pools; 0 (any readable row) past the range
  if (mj < hi) mine = ((a.tables[n * a.st + mj / a.BS] * a.BS + mj % a.BS) * a.nKV + h) * HD;
#pragma unroll
  for (int i = 0; i < CK / KPI; ++i) {
    const int key = KPI * i + sub;
    const long long off = __shfl_sync(0xffffffffu, mine, key) + piece * 8;
    const u32 bytes = j0 + key < hi ? 16u : 0u, d = dst + key * ROWB + ((piece ^ (key & 7)) << 4);
    cp_async16(d, a.k + off, bytes);
    cp_async16(d + CK * ROWB, a.v + off, bytes);
  }
}

struct Softmax {
  float m[2], l[2];  // heads 2t, 2t + 1: running max (log2 units) and this lane's partial sum
};

// one chunk in stage `st` (keys j0 + 0..15, `valid` of them real): scores, softmax update, O^T += V^T P^T
__device__ __forceinline__ void compute_chunk(const Args& a, u32 st, const u32 (&qb)[KT][2], int valid,
                                              Softmax& sm, float (&acc)[KT][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, r = lane & 7, i = lane >> 3;
  const u32 krow = st + (r + 8 * (i & 1)) * ROWB, vrow = st + CK * ROWB + (r + 8 * (i >> 1)) * ROWB;
  float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int ks = 0; ks < KT; ++ks) {
    u32 af[4];
    ldsm_x4(krow + (((2 * ks + (i >> 1)) ^ r) << 4), af);
    mma16816((ks & 1) ? c1 : c0, af, qb[ks][0], qb[ks][1]);
  }
  float s[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const bool ok = (e < 2 ? g : g + 8) < valid;
    s[e] = ok ? (c0[e] + c1[e]) * a.scale_log2 : NEG_INF;
  }
  u32 pb[2];
  float alpha[2], p[4];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float mx = fmaxf(s[hh], s[hh + 2]);
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float mn = fmaxf(sm.m[hh], mx);  // finite: key 0 of the chunk is valid
    alpha[hh] = exp2f(sm.m[hh] - mn);       // 0 while m is -inf
    p[hh] = exp2f(s[hh] - mn), p[hh + 2] = exp2f(s[hh + 2] - mn);
    sm.l[hh] = sm.l[hh] * alpha[hh] + p[hh] + p[hh + 2];
    sm.m[hh] = mn;
  }
  pb[0] = movmatrix_t(pack_bf2(p[0], p[1]));
  pb[1] = movmatrix_t(pack_bf2(p[2], p[3]));
#pragma unroll
  for (int mt = 0; mt < KT; ++mt) {
    acc[mt][0] *= alpha[0], acc[mt][1] *= alpha[1], acc[mt][2] *= alpha[0], acc[mt][3] *= alpha[1];
    u32 af[4];
    ldsm_x4_t(vrow + (((2 * mt + (i & 1)) ^ r) << 4), af);
    mma16816(acc[mt], af, pb[0], pb[1]);
  }
}

// the warps' (m, l, O) merged through shared memory (the ring, no longer in use); S = 1: out, else the ws entry
__device__ __forceinline__ void merge_warps(const Args& a, int n, int h, int split, int splits, const Softmax& sm,
                                            const float (&acc)[KT][4], unsigned char* smem) {
  float* red = reinterpret_cast<float*>(smem);  // [NW][8 heads][HD]
  __shared__ float wm[NW][8], wl[NW][8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  float l[2] = {sm.l[0], sm.l[1]};
#pragma unroll
  for (int hh = 0; hh < 2; ++hh)
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) l[hh] += __shfl_xor_sync(0xffffffffu, l[hh], o);
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();
  if (g == 0) wm[warp][2 * t] = sm.m[0], wm[warp][2 * t + 1] = sm.m[1], wl[warp][2 * t] = l[0], wl[warp][2 * t + 1] = l[1];
  float* mine = red + warp * 8 * HD;
#pragma unroll
  for (int mt = 0; mt < KT; ++mt) {
    const int d = 16 * mt + g;
    mine[(2 * t) * HD + d] = acc[mt][0], mine[(2 * t + 1) * HD + d] = acc[mt][1];
    mine[(2 * t) * HD + d + 8] = acc[mt][2], mine[(2 * t + 1) * HD + d + 8] = acc[mt][3];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < a.G * HD; idx += NW * 32) {
    const int hd = idx / HD, d = idx - hd * HD;
    float mx = NEG_INF;
#pragma unroll
    for (int w = 0; w < NW; ++w) mx = fmaxf(mx, wm[w][hd]);
    float o = 0.f, L = 0.f;
#pragma unroll
    for (int w = 0; w < NW; ++w) {
      const float f = wm[w][hd] == NEG_INF ? 0.f : exp2f(wm[w][hd] - mx);
      o += red[(w * 8 + hd) * HD + d] * f, L += wl[w][hd] * f;
    }
    store_split(a, n, h, split, splits, hd, d, o, mx, L);
  }
}

// q [Nd, nH, HD] bf16 (row stride sq); k, v pools [blocks, BS, nKV, HD] bf16; tables [Nd, B] int64 (row stride st);
// num_keys [Nd] int32 (>= 1); out [Nd, nH, HD] bf16; ws [Nd, nKV, S, WS_ENTRY] f32 (S > 1 only). Dynamic shared
// memory: max(NW NST STAGE_BYTES, NW 8 HD 4) bytes.
extern "C" __global__ void __launch_bounds__(NW * 32)
paged_decode_mma(const u16* __restrict__ q, long long sq, const u16* __restrict__ k, const u16* __restrict__ v,
                 const long long* __restrict__ tables, long long st, const int* __restrict__ num_keys,
                 u16* __restrict__ out, float* __restrict__ ws, int nKV, int G, int BS, float scale_log2) {
  extern __shared__ __align__(128) unsigned char smem[];
  const Args a{q, sq, k, v, tables, st, num_keys, out, ws, nKV, G, BS, scale_log2};
  const int split = blockIdx.x, splits = gridDim.x, h = blockIdx.y, n = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int nk = num_keys[n], per = CK * (((nk + CK - 1) / CK + splits - 1) / splits);
  const int lo = min(nk, split * per), hi = min(nk, lo + per);
  const int chunks = (hi - lo + CK - 1) / CK, mine = chunks > warp ? (chunks - warp + NW - 1) / NW : 0;
  const u32 ring = smem_u32(smem) + warp * NST * STAGE_BYTES;
#pragma unroll
  for (int c = 0; c < NST - 1; ++c) {
    if (c < mine) issue_chunk(a, n, h, lo + (warp + c * NW) * CK, hi, ring + c * STAGE_BYTES);
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  u32 qb[KT][2];  // B fragments of Q^T: head g, dims 16 ks + 2t (+1), + 8 (+9); zeros for heads >= G
  const u16* qrow = q + n * sq + (long long)(h * G + g) * HD;
#pragma unroll
  for (int ks = 0; ks < KT; ++ks) {
    qb[ks][0] = g < G ? *reinterpret_cast<const u32*>(qrow + 16 * ks + 2 * t) : 0u;
    qb[ks][1] = g < G ? *reinterpret_cast<const u32*>(qrow + 16 * ks + 2 * t + 8) : 0u;
  }
  float acc[KT][4];
#pragma unroll
  for (int mt = 0; mt < KT; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.f;
  Softmax sm{{NEG_INF, NEG_INF}, {0.f, 0.f}};
  for (int c = 0; c < mine; ++c) {
    const int ahead = c + NST - 1;
    if (ahead < mine) issue_chunk(a, n, h, lo + (warp + ahead * NW) * CK, hi, ring + (ahead % NST) * STAGE_BYTES);
    asm volatile("cp.async.commit_group;\ncp.async.wait_group %0;" ::"n"(NST - 1) : "memory");
    __syncwarp();
    const int j0 = lo + (warp + c * NW) * CK;
    compute_chunk(a, ring + (c % NST) * STAGE_BYTES, qb, hi - j0, sm, acc);
    __syncwarp();  // every lane's reads of this stage are done before it is refilled
  }
  merge_warps(a, n, h, split, splits, sm, acc, smem);
}
