// NVFP4 GEMV v10 ("block columns"), M = 1 row (decode of one sequence): y[1, N] = x[1, K] W^T, f32 sums, bf16 out.
//
// Why: at M = 1 only 1 of mma.m16n8k16's 8 B columns carries x, and the split-K kernels spend 4 of their ~13 ops per
// fragment word multiplying the decoded codes by their block scale (common.cuh decode_word). Here the 8 columns are
// the 8 scale blocks of a chunk pair (chunks 2p, 2p+1; column j = block j % 4 of chunk 2p + j / 4): lane (g, t)'s
// B fragment is x (its 16 k of chunk c) where g == t + 4 (c % 2), else zeros, so column j of C is row n's partial
// dot product over block j alone. The codes go into the MMA unscaled (decode_word_raw: A = e2m1 * 2^-126, 9 ALU ops
// per word), x scaled by 2^100 (staged once per block in shared memory, bf16, exact for |x| < 2^28) so the products
// stay normal f32; after a pair's 8 MMAs each lane multiplies its 4 C values (rows g, g+8 x columns 2t, 2t+1) by
// their e4m3 block scales (cvt.f16x2.e4m3x2, exact) and adds them to two f32 sums; a segment's end adds the 4 lanes
// t of a row (two shuffles). The store multiplies by alpha = gmul * 2^26.
//
// Layouts: wq = the split-K kernels' fragments (repack.py, common.cuh), unchanged; wsb u32 [Np/16, Kp, 32] (Kp =
// ceil(Kc / 2) pairs, gemv_bc.py): lane 4g + t's word holds the e4m3 scales of (row g, column 2t), (g, 2t + 1),
// (g + 8, 2t), (g + 8, 2t + 1) in bytes 0..3. Work split, workspace and counters: gemv.cu's v7 (persistent grid,
// items = (row group of 128 rows, chunk pair) split evenly over the blocks; a block that covers part of a row group
// flushes through gemv_split.cuh). Needs K % 8 == 0 and x 16-byte aligned (gemv_bc.py checks).
// Launched with programmatic dependent launch (gemv_bc.py, pdl): each block issues its first weight loads, then
// waits (griddepcontrol.wait) for the previous kernel before it reads x or writes anything, and lets the next kernel
// launch at its start (its blocks take SMs as this grid's blocks leave).
#include "gemv_bc_pairs.cuh"

template <int U, int MODE>
__device__ void gemv_bc_body(const GemvArgs& p) {
    __shared__ int s_last;
    extern __shared__ uint4 xs[];
    const int kp = (p.Kc + 1) >> 1;
    const long long total = (long long)(p.Np / 128) * kp;
    long long i = total * blockIdx.x / gridDim.x;
    const long long end = total * (blockIdx.x + 1) / gridDim.x;
    bool first = true;
    pdl_launch_dependents();
    if (i >= end) pdl_wait();
    while (i < end) {
        const int rg = (int)(i / kp), qa = (int)(i % kp);
        const int qb = (int)min((long long)kp, qa + (end - i));
        const int tile = rg * 8 + (threadIdx.x >> 5);
        float acc[1][4];
        pair_segment<U, MODE>(p, tile, qa, qb, xs, first, acc);
        first = false;
        if (qb - qa == kp)
            store_y<1>(YOut{p.y, p.alpha, 1, p.N}, tile, acc);
        else if (MODE != MODE_NOFLUSH)
            gemv_flush<1>(p, rg, min(2 * qb, p.Kc) - 2 * qa, acc, &s_last);
        i += qb - qa;
    }
}

#define BC_PARAMS const uint4* wq, const u32* wsb, const u16* x, u16* y, float* ws, int* counters, \
                  const float* alpha, int N, int K, int Np, int Kc
#define BC_ARGS GemvArgs{wq, (const u16*)wsb, x, y, ws, counters, alpha, 1, N, K, Np, Kc}
// U = chunk pairs per half-buffer (4U fragments of 512 B in flight per warp)
#define BC_KERNEL(name, U, MODE) \
    extern "C" __global__ void __launch_bounds__(256, 2) name(BC_PARAMS) { gemv_bc_body<U, MODE>(BC_ARGS); }
BC_KERNEL(nvfp4_gemv_bc_u2, 2, MODE_NORMAL)
BC_KERNEL(nvfp4_gemv_bc_u3, 3, MODE_NORMAL)
BC_KERNEL(nvfp4_gemv_bc_u4, 4, MODE_NORMAL)
BC_KERNEL(nvfp4_gemv_bc_u3_noflush, 3, MODE_NOFLUSH)
// three blocks per SM (at most 85 registers, 77 used: 24 warps per SM to hide the decode; bench column, no gain)
extern "C" __global__ void __launch_bounds__(256, 3) nvfp4_gemv_bc_u2_b3(BC_PARAMS) {
    gemv_bc_body<2, MODE_NORMAL>(BC_ARGS);
}
BC_KERNEL(nvfp4_gemv_bc_u3_loadonly, 3, MODE_LOADONLY)
