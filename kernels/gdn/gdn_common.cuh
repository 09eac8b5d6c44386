// gdn_common.cuh: helpers shared by the Gated DeltaNet kernels (no CUDA headers needed: NVRTC or nvcc, sm_90).
// bf16/fp16 <-> f32 conversions through PTX cvt, ldmatrix, and the m16n8k16 fp16 tensor-core MMA (f32 accum).
// Fragment layouts: PTX ISA "Matrix Fragments for mma.m16n8k16" (g = lane / 4, t = lane % 4):
//   A 16x16: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..)
//   B 16x8:  b0 (k 2t..2t+1, n g), b1 (k 2t+8.., n g);  C 16x8: c0,c1 (g, 2t..2t+1), c2,c3 (g+8, 2t..2t+1)
#pragma once

typedef unsigned short u16;
typedef unsigned int u32;

#define GDN_L2_EPS 1e-6f

// programmatic dependent launch (kernels/_pdl.py): let the next kernel launch now / wait until the kernel launched
// before this one has completed and its writes are visible. No-ops in plain launches and before sm_90.
__device__ __forceinline__ void pdl_allow_dependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float(((u32)h) << 16); }
__device__ __forceinline__ float bflo(u32 w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bfhi(u32 w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ u16 f2bf(float x) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}

// two floats -> packed bf16x2 / f16x2, lo in the low half (round to nearest even)
__device__ __forceinline__ u32 pack_bf2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ u32 pack_h2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ float hlo(u32 w) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((u16)(w & 0xffffu)));
  return f;
}
__device__ __forceinline__ float hhi(u32 w) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((u16)(w >> 16)));
  return f;
}

__device__ __forceinline__ float softplus20(float x) { return x > 20.f ? x : log1pf(__expf(x)); }

// g = -exp(A_log) * softplus(a + dt_bias)  (model-spec 1.7, fp32, softplus threshold 20)
__device__ __forceinline__ float gdn_gate(float a, float a_log, float dt_bias) {
  return -__expf(a_log) * softplus20(a + dt_bias);
}
__device__ __forceinline__ float sigmoidf_(float x) { return 1.f / (1.f + __expf(-x)); }

// a[c] and b[c] summed over the lanes that differ in bits FROM..16 of the lane id (the row groups of a warp whose
// threads hold the same columns)
template <int FROM, int N>
__device__ __forceinline__ void warp_sum_pairs(float (&a)[N], float (&b)[N]) {
#pragma unroll
  for (int c = 0; c < N; ++c) {
#pragma unroll
    for (int m = FROM; m < 32; m <<= 1) {
      a[c] += __shfl_xor_sync(0xffffffffu, a[c], m);
      b[c] += __shfl_xor_sync(0xffffffffu, b[c], m);
    }
  }
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ __forceinline__ u32 smem_addr(const void* p) {
  u32 r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}

__device__ __forceinline__ void ldsm_x4(u32 (&r)[4], const u16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x4_t(u32 (&r)[4], const u16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma_f16(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// acc[NT][4] += A[m0:m0+16, 0:KLEN] @ B[0:KLEN, n0:n0+8*NT], fp16 operands in shared memory.
// A_T false: A stored [M][K] (row stride lda); true: stored [K][M]. B_T false: B stored [N][K]; true: [K][N].
// Row strides must keep every 8-row group on distinct banks (pad rows by 8 halves).
template <int NT, int KLEN, bool A_T, bool B_T>
__device__ __forceinline__ void warp_mma(float (&acc)[NT][4], const u16* A, int lda, int m0, const u16* B,
                                         int ldb, int n0) {
  const int l = threadIdx.x & 31;
#pragma unroll
  for (int k0 = 0; k0 < KLEN; k0 += 16) {
    u32 a[4];
    if (!A_T)
      ldsm_x4(a, A + (m0 + (l & 7) + 8 * ((l >> 3) & 1)) * lda + k0 + 8 * (l >> 4));
    else
      ldsm_x4_t(a, A + (k0 + (l & 7) + 8 * (l >> 4)) * lda + m0 + 8 * ((l >> 3) & 1));
#pragma unroll
    for (int j = 0; j < NT; j += 2) {
      u32 b[4];
      const int n = n0 + 8 * j;
      if (!B_T)
        ldsm_x4(b, B + (n + (l & 7) + 8 * (l >> 4)) * ldb + k0 + 8 * ((l >> 3) & 1));
      else
        ldsm_x4_t(b, B + (k0 + (l & 7) + 8 * ((l >> 3) & 1)) * ldb + n + 8 * (l >> 4));
      mma_f16(acc[j], a, b[0], b[1]);
      mma_f16(acc[j + 1], a, b[2], b[3]);
    }
  }
}

template <int NT>
__device__ __forceinline__ void zero_acc(float (&acc)[NT][4]) {
#pragma unroll
  for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
}

// output element type: OUT_F32=1 float, else bf16 (u16); store two consecutive values
#if OUT_F32
typedef float out_t;
__device__ __forceinline__ void st_out2(out_t* p, float x, float y) {
  *reinterpret_cast<float2*>(p) = make_float2(x, y);
}
#else
typedef u16 out_t;
__device__ __forceinline__ void st_out2(out_t* p, float x, float y) { *reinterpret_cast<u32*>(p) = pack_bf2(x, y); }
#endif

// 16-byte / 4-byte global -> shared asynchronous copies (sm_80+); src_bytes 0 zero-fills the destination.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
__device__ __forceinline__ void cp_async_wait1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }

// acc0 += A0 @ B and acc1 += A1 @ B sharing the B fragments (A0, A1 stored [M][K], same lda; B as warp_mma).
template <int NT, int KLEN, bool B_T>
__device__ __forceinline__ void warp_mma2(float (&acc0)[NT][4], float (&acc1)[NT][4], const u16* A0, const u16* A1,
                                          int lda, int m0, const u16* B, int ldb, int n0) {
  const int l = threadIdx.x & 31;
#pragma unroll
  for (int k0 = 0; k0 < KLEN; k0 += 16) {
    u32 a0[4], a1[4];
    const int arow = (m0 + (l & 7) + 8 * ((l >> 3) & 1)) * lda + k0 + 8 * (l >> 4);
    ldsm_x4(a0, A0 + arow);
    ldsm_x4(a1, A1 + arow);
#pragma unroll
    for (int j = 0; j < NT; j += 2) {
      u32 b[4];
      const int n = n0 + 8 * j;
      if (!B_T)
        ldsm_x4(b, B + (n + (l & 7) + 8 * (l >> 4)) * ldb + k0 + 8 * ((l >> 3) & 1));
      else
        ldsm_x4_t(b, B + (k0 + (l & 7) + 8 * ((l >> 3) & 1)) * ldb + n + 8 * (l >> 4));
      mma_f16(acc0[j], a0, b[0], b[1]);
      mma_f16(acc0[j + 1], a0, b[2], b[3]);
      mma_f16(acc1[j], a1, b[0], b[1]);
      mma_f16(acc1[j + 1], a1, b[2], b[3]);
    }
  }
}

typedef unsigned long long u64;

// mbarrier and bulk-copy PTX (PTX ISA 8.0: mbarrier, cp.async.bulk; recurrent_tma.cu)
__device__ __forceinline__ void mbar_init(u64* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(u64* bar, u32 parity) {
  asm volatile(
      "{\n .reg .pred done;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT_%=;\n}" ::"r"(smem_addr(bar)), "r"(parity) : "memory");
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, u32 bytes, u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void bulk_store(void* dst, const void* src, u32 bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_addr(src)),
               "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// generic-proxy writes to shared memory, then made visible to the async proxy (the bulk store reads them)
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
