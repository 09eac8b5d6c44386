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

// after this block's partial sums are issued: the barrier orders every thread's reductions before thread 0's
// (cumulative) fence and counter bump. True in the block whose chunks complete row group rg (acquire fence taken).
__device__ __forceinline__ bool completes_row_group(const GemvArgs& p, int rg, int nchunks, int* s_last) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        *s_last = atomicAdd(p.counters + rg, nchunks) + nchunks == p.Kc;
    }
    __syncthreads();
    if (!*s_last) return false;
    __threadfence();
    return true;
}

// v2's flush (MODE_ATOMIC) of a partial segment: red.add into the zeroed workspace, the finishing block reads back
// with atomicExch
template <int NT>
__device__ void flush_atomic(const GemvArgs& p, int rg, int nchunks, const float (&acc)[NT][4], int* s_last) {
    const int tile = rg * 8 + (threadIdx.x >> 5);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int m = acc_m(nt, i);
            if (m < p.M) atomicAdd(p.ws + (u64)m * p.Np + acc_n(tile, i), acc[nt][i]);
        }
    if (!completes_row_group(p, rg, nchunks, s_last)) return;
    for (int i = threadIdx.x; i < 128 * p.M; i += blockDim.x) {
        const int m = i >> 7, n = rg * 128 + (i & 127);
        const float v = atomicExch(p.ws + (u64)m * p.Np + n, 0.0f);
        if (n < p.N) p.y[(u64)m * p.N + n] = f32_to_bf16(v * p.alpha[n >> 4]);
    }
    if (threadIdx.x == 0) p.counters[rg] = 0;
}

__device__ __forceinline__ void red_add_v4(float4* p, const float (&v)[4]) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
                 : "memory");
}

// v7 flush of a partial segment of nchunks chunks of row group rg: see the header
template <int NT>
__device__ void gemv_flush(const GemvArgs& p, int rg, int nchunks, float (&acc)[NT][4], int* s_last) {
    const int tile = rg * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    float4* ws = (float4*)p.ws + (u64)tile * NT * 32 + lane;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
        if (acc_m(nt, 0) < p.M) red_add_v4(ws + nt * 32, acc[nt]);
    if (!completes_row_group(p, rg, nchunks, s_last)) return;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        if (acc_m(nt, 0) >= p.M) continue;
        const float4 v = __ldcg(ws + nt * 32);
        __stcg(ws + nt * 32, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
        acc[nt][0] = v.x, acc[nt][1] = v.y, acc[nt][2] = v.z, acc[nt][3] = v.w;
    }
    store_y<NT>(YOut{p.y, p.alpha, p.M, p.N}, tile, acc);
    if (threadIdx.x == 0) p.counters[rg] = 0;
}

// XS: x staged once per block in dynamic shared memory ([M, Kc * 64] bf16), read from there by every warp
template <int NT, int U, int MODE, bool XS = false>
__device__ void gemv_body(const GemvArgs& p) {
    __shared__ u32 lut[256];
    __shared__ int s_last;
    extern __shared__ uint4 xs[];
    lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    if (XS) stage_x(p, xs);
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
        gemv_segment<NT, U, SEG_MODE, XS>(p, rg * 8 + (threadIdx.x >> 5), ca, cb, lut, acc, xs, first);
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
