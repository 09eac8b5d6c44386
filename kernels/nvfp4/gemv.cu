// NVFP4 weight x bf16 activations for M = 1..32 rows (decode): y[M, N] = x[M, K] W^T, f32 accumulate, bf16 out.
//
// Grid: persistent, gridDim.x blocks (about 2 per SM); block = 256 threads = 8 warps. Work items are
// (row group rg = 128 weight rows, k chunk c = 64 k), linearised rg-major, T = (Np/128) * Kc items split evenly over
// the blocks: block b takes items [b*T/G, (b+1)*T/G). Within a row group the 8 warps take one 16-row tile each and
// walk the block's chunks through two half-buffers of U chunks (one in flight while the other is computed; 2U
// fragments of 512 B per warp). Lane (g, t) dequantizes its fragment
// into A registers (see common.cuh) and runs mma.m16n8k16 with B = x^T: NT n8 tiles cover the M rows (NT = 1: M <= 8,
// 2: M <= 16, 4: M <= 32); lanes whose row m >= M feed zeros.
// A block that covers a whole row group writes y directly; otherwise (v7) each lane adds its accumulator float4s
// into ws[Np/16 tiles, NT, 32 lanes] float4 with one vector reduction each (red.global.add.v4.f32, sm_90) and the
// block bumps counters[rg] by its chunk count; the block that completes Kc chunks reads the sums back (ld.cg), zeroes
// them for the next call (st.cg), scales by alpha and writes y. v2 (the *_atomic kernels, kept for the bench) did
// one scalar red.add per output element and read back with atomicExch: 4x the atomic operations.
#include "gemv_core.cuh"
#include "gemv_split.cuh"

// XS: x staged once per block in dynamic shared memory ([M, Kc * 64] bf16), read from there by every warp.
// EARLY: the block's first weight loads go out before griddepcontrol.wait, x (and its staging) after it; otherwise
// the block waits at its start (PDL launch, ops.py: only the launch itself overlaps the kernel before).
template <int NT, int U, int MODE, bool XS = false, bool EARLY = false>
__device__ void gemv_body(const GemvArgs& p) {
    __shared__ u32 lut[256];
    __shared__ int s_last;
    extern __shared__ uint4 xs[];
    pdl_launch_dependents();
    if (!EARLY) pdl_wait();
    lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    if (XS && !EARLY) stage_x(p, xs);
    __syncthreads();
    bool first = true;
    const long long total = (long long)(p.Np / 128) * p.Kc;
    long long i = total * blockIdx.x / gridDim.x;
    const long long end = total * (blockIdx.x + 1) / gridDim.x;
    constexpr int SEG_MODE = MODE == MODE_ATOMIC ? MODE_NORMAL : MODE;
    while (i < end) {
        const int rg = (int)(i / p.Kc), ca = (int)(i % p.Kc);
        const int cb = (int)min((long long)p.Kc, ca + (end - i));
        float acc[NT][4];
        gemv_segment<NT, U, SEG_MODE, XS, EARLY>(p, rg * 8 + (threadIdx.x >> 5), ca, cb, lut, acc, xs, first);
        first = false;
        if (cb - ca == p.Kc)  // the block covers the whole row group: y directly
            store_y<NT>(YOut{p.y, p.alpha, p.M, p.N}, rg * 8 + (threadIdx.x >> 5), acc);
        else if (MODE == MODE_ATOMIC)
            flush_atomic<NT>(p, rg, cb - ca, acc, &s_last);
        else if (MODE != MODE_NOFLUSH)
            gemv_flush<NT>(p, rg, cb - ca, acc, &s_last);
        i += cb - ca;
    }
}

#define GEMV_PARAMS const uint4* wq, const u16* wsc, const u16* x, u16* y, float* ws, int* counters, \
                    const float* alpha, int M, int N, int K, int Np, int Kc
#define GEMV_ARGS GemvArgs{wq, wsc, x, y, ws, counters, alpha, M, N, K, Np, Kc}
// U = chunks per half-buffer (2U in flight per warp), sized so registers stay under the 128 that 2 blocks/SM allow
#define GEMV_KERNEL(name, NT, U, MODE) \
    extern "C" __global__ void __launch_bounds__(256, 2) name(GEMV_PARAMS) { gemv_body<NT, U, MODE>(GEMV_ARGS); }
// x in shared memory (ops.gemv_v2 where M * Kc * 128 bytes <= XS_MAX_BYTES): no x registers, so deeper U
#define GEMV_XS_KERNEL(name, NT, U, MODE) \
    extern "C" __global__ void __launch_bounds__(256, 2) name(GEMV_PARAMS) { gemv_body<NT, U, MODE, true>(GEMV_ARGS); }
GEMV_XS_KERNEL(nvfp4_gemv_xs_nt1, 1, 6, MODE_NORMAL)
GEMV_XS_KERNEL(nvfp4_gemv_xs_nt2, 2, 4, MODE_NORMAL)
GEMV_XS_KERNEL(nvfp4_gemv_xs_nt1_u4, 1, 4, MODE_NORMAL)
GEMV_XS_KERNEL(nvfp4_gemv_xs_nt1_loadonly, 1, 6, MODE_LOADONLY)
GEMV_KERNEL(nvfp4_gemv_nt1, 1, 3, MODE_NORMAL)
GEMV_KERNEL(nvfp4_gemv_nt2, 2, 2, MODE_NORMAL)
GEMV_KERNEL(nvfp4_gemv_nt4, 4, 1, MODE_NORMAL)
GEMV_KERNEL(nvfp4_gemv_nt1_atomic, 1, 3, MODE_ATOMIC)
GEMV_KERNEL(nvfp4_gemv_nt2_atomic, 2, 2, MODE_ATOMIC)
GEMV_KERNEL(nvfp4_gemv_nt4_atomic, 4, 1, MODE_ATOMIC)
GEMV_KERNEL(nvfp4_gemv_nt1_l1, 1, 3, MODE_L1)
GEMV_KERNEL(nvfp4_gemv_nt2_l1, 2, 2, MODE_L1)
GEMV_KERNEL(nvfp4_gemv_nt1_noflush, 1, 3, MODE_NOFLUSH)
GEMV_KERNEL(nvfp4_gemv_nt1_loadonly, 1, 3, MODE_LOADONLY)
GEMV_KERNEL(nvfp4_gemv_nt2_noflush, 2, 2, MODE_NOFLUSH)
// the first weight loads before griddepcontrol.wait (EARLY)
#define GEMV_EARLY_KERNEL(name, NT, U, XS)                                                 \
    extern "C" __global__ void __launch_bounds__(256, 2) name(GEMV_PARAMS) {              \
        gemv_body<NT, U, MODE_NORMAL, XS, true>(GEMV_ARGS);                                \
    }
GEMV_EARLY_KERNEL(nvfp4_gemv_nt1_early, 1, 3, false)
GEMV_EARLY_KERNEL(nvfp4_gemv_nt2_early, 2, 2, false)
GEMV_EARLY_KERNEL(nvfp4_gemv_nt4_early, 4, 1, false)
GEMV_EARLY_KERNEL(nvfp4_gemv_xs_nt1_early, 1, 6, true)
GEMV_EARLY_KERNEL(nvfp4_gemv_xs_nt2_early, 2, 4, true)
