// bulk_ptx.cuh: mbarrier and cp.async.bulk (TMA, non-tensor) wrappers for sm_90 (PTX ISA 8.0, sections
// "mbarrier" and "cp.async.bulk"), used by gemv_bulk.cu (generic pointers) and gemm_ws.cuh (shared-window
// addresses, u32): each takes either.
#pragma once
#include "common.cuh"

// `count` arrivals (default one: the producer's expect_tx) complete a phase once its transaction bytes have landed
__device__ __forceinline__ void mbar_init(u32 bar, u32 count = 1) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init(unsigned long long* bar, u32 count = 1) { mbar_init(smem_u32(bar), count); }
// makes mbarrier.init visible to the async proxy (the bulk copies that complete on it)
__device__ __forceinline__ void fence_mbarrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned long long* bar, u32 bytes) {
    mbar_expect_tx(smem_u32(bar), bytes);
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    asm volatile(
        "{\n .reg .pred done;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        " @!done bra WAIT_%=;\n}" ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, u32 parity) { mbar_wait(smem_u32(bar), parity); }
// this thread's cp.async copies so far arrive on `bar` once they have landed (no pending count added: the
// mbar_init count includes them)
__device__ __forceinline__ void cp_async_mbar_arrive(u32 bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
// global -> shared, `bytes` (multiple of 16, both addresses 16-byte aligned), completing on `bar`
__device__ __forceinline__ void bulk_load(u32 dst, const void* src, u32 bytes, u32 bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, u32 bytes, unsigned long long* bar) {
    bulk_load(smem_u32(dst), src, bytes, smem_u32(bar));
}
