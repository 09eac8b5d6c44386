// Device helpers shared by gemv.cu and gemm.cu: loads, the repacked-NVFP4 decode, e4m3 scales, bf16 MMA.
//
// Repacked weight layout (built by ops.repack): for row tile r (16 rows) and k chunk c (64 k), lane = 4g + t of a
// warp owns one 16-byte fragment = rows 16r+g and 16r+g+8, k in [64c+16t, 64c+16t+16) (exactly one scale block).
// Word st (0..3) of the fragment holds the 8 codes the lane feeds to MMA k-step st (k = 16t+4st .. 16t+4st+3) in a
// bit layout (repack.FIELD_ROT) that makes each bf16x2 output one rotate and one mask (the last: two of each): output
// j = A register j of mma.m16n8k16 (j = 0: row g k pair 0, 1: row g+8 pair 0, 2: row g pair 1, 3: row g+8 pair 1);
// low/high half = lower/higher k.
// Output bits: sign at 15, e1 e0 m at 8..6 (a bf16 whose value is e2m1 * 2^-126, a subnormal for |v| <= 0.5),
// then multiplied by the block scale stored as bf16 e4m3 * 2^64, so A = e2m1 * s * 2^-62 (exact in bf16); the
// epilogue multiplies by alpha = gmul * 2^62. The MMA's logical k order is a permutation of the real one; B (x)
// uses the same permutation: lane (g, t) reads x[m][64c+16t .. +16], 32 contiguous bytes.
#pragma once

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

// generic -> shared-window address (the operand of cp.async, ldmatrix, mbarrier and bulk-copy PTX)
__device__ __forceinline__ u32 smem_u32(const void* p) {
    return (u32)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ uint4 ld_stream16(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ uint4 ld_nc16(const void* p) {
    uint4 v;
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ u32 ld_stream_u16(const u16* p) {
    u16 v;
    asm volatile("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ u32 ld_stream_u32(const u32* p) {
    u32 v;
    asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ u32 ld_nc_u16(const u16* p) {
    u16 v;
    asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}

// bf16x2 a * b (round to nearest; subnormal inputs kept)
__device__ __forceinline__ u32 bmul2(u32 a, u32 b) {
    u32 d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
    return d;
}

// e4m3 byte -> bf16x2 (both halves) of its value * 2^64, exact
__device__ __forceinline__ u32 e4m3_scaled_bf16x2(u32 b) {
    const u32 e = (b >> 3) & 15u;
    float v = e ? __uint_as_float(((b & 0x7Fu) << 20) + (184u << 23)) : (float)(b & 7u) * 0x1p55f;
    u32 h = (__float_as_uint(v) >> 16) | ((b & 0x80u) << 8);
    return h | (h << 16);
}

// programmatic dependent launch (kernels/_pdl.py, ops.PDL): let the next kernel launch now / wait until the kernel
// launched before this one has completed and its writes are visible. No-ops in plain launches and before sm_90.
__device__ __forceinline__ void pdl_launch_dependents() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ u32 rotr(u32 q, int r) { return __funnelshift_r(q, q, r); }

// one fragment word -> the 4 A registers of one k-step, unscaled: A = e2m1 * 2^-126 (bf16; |v| = 0.5 is a
// subnormal, which mma.sync keeps: device probe, kernels/nvfp4/NOTES.md session 6); bit layout repack.FIELD_ROT,
// 9 ALU ops per word
__device__ __forceinline__ void decode_word_raw(u32 q, u32 a[4]) {
    const u32 mask = 0x81C081C0u;
    a[0] = q & mask;
    a[1] = rotr(q, 4) & mask;
    a[2] = rotr(q, 10) & mask;
    a[3] = (rotr(q, 14) & 0x00400040u) | (rotr(q, 6) & 0x81808180u);
}

// one fragment word -> the 4 A registers of one k-step, scaled (sg: row g scale, sg8: row g+8 scale): decode_word_raw
// and 4 bf16x2 multiplies, interleaved (written out: the production kernels' SASS and measured times stay as they were)
__device__ __forceinline__ void decode_word(u32 q, u32 sg, u32 sg8, u32 a[4]) {
    const u32 mask = 0x81C081C0u;
    a[0] = bmul2(q & mask, sg);
    a[1] = bmul2(rotr(q, 4) & mask, sg8);
    a[2] = bmul2(rotr(q, 10) & mask, sg);
    a[3] = bmul2((rotr(q, 14) & 0x00400040u) | (rotr(q, 6) & 0x81808180u), sg8);
}

__device__ __forceinline__ void mma_bf16(float c[4], const u32 a[4], u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ u16 f32_to_bf16(float v) {
    u16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}

// 16 bytes global -> shared, asynchronous (cp.async, sm_80+); ok false: the destination is zero-filled, src not read
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool ok) {
    u32 d;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(d) : "l"(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(d), "l"(src), "r"(ok ? 16 : 0));
}

__device__ __forceinline__ u32 word_of(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
