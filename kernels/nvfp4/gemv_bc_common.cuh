// gemv_bc_common.cuh: what the block-column GEMVs share (gemv_bc.cu for M = 1, gemv_bcr.cu for M = 2..8): x staged
// as x * 2^100 (so e2m1 * 2^-126 codes times x stay normal f32), e4m3 scale pairs to f32, 16-byte shared loads and the
// MMA without an accumulator input. Method and layouts: gemv_bc.cu's header.
#pragma once
#include "gemv_core.cuh"
#include "gemv_split.cuh"

constexpr u32 X_SCALE = 0x71807180u;  // bf16x2 (2^100, 2^100)

// e4m3x2 (low byte -> .x) -> two f32, exact
__device__ __forceinline__ float2 e4m3x2_to_float2(u32 b) {
    float2 f;
    asm("{ .reg .b16 s, lo, hi; .reg .b32 h; cvt.u16.u32 s, %2; cvt.rn.f16x2.e4m3x2 h, s; mov.b32 {lo, hi}, h;\n"
        "  cvt.f32.f16 %0, lo; cvt.f32.f16 %1, hi; }"
        : "=f"(f.x), "=f"(f.y) : "r"(b));
    return f;
}

__device__ __forceinline__ uint4 lds16(u32 addr) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
    return v;
}

// c = A B (no accumulator input: the C operand is zero)
__device__ __forceinline__ void mma_bf16_first(float c[4], const u32 a[4], u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%10,%10,%10};"
                 : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
}

