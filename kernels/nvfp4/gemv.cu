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
#include "common.cuh"

struct GemvArgs {
    const uint4* wq;     // [Np/16, Kc, 32] fragments
    const u16* wsc;      // [Np/16, Kc, 32] scale pairs (low byte row g, high byte row g+8)
    const u16* x;        // [M, K] bf16
    u16* y;              // [M, N] bf16
    float* ws;           // v7: [Np/16, NT, 32] float4; *_atomic: [32, Np] f32; zero between calls
    int* counters;       // [Np/128], zero between calls
    const float* alpha;  // [Np/16] gmul * 2^62 per 16-row tile (fused shards may differ)
    int M, N, K, Np, Kc;
};

// MODE: 0 normal; timing diagnostics for the bench (wrong results): 1 skips the split-K flush, 2 skips the decode and
// MMA (loads only); 3 = normal but weights loaded through L1 (ld.global.nc) instead of L1::no_allocate
// 4 = v2's scalar-atomic flush (bench comparison)
enum { MODE_NORMAL = 0, MODE_NOFLUSH = 1, MODE_LOADONLY = 2, MODE_L1 = 3, MODE_ATOMIC = 4 };

// U chunks of one warp in flight: weight fragments, scale pairs, x (B) fragments
template <int NT, int U>
struct Group {
    uint4 w[U];
    u32 s[U];
    uint4 xv[U][NT][2];
};

template <int NT, int U, int MODE>
__device__ __forceinline__ void load_group(const GemvArgs& p, const uint4* wp, const u16* sp, int c, int cb,
                                           Group<NT, U>& grp) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const uint4 zero4 = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int cc = c + u;
        if (cc >= cb) break;
        grp.w[u] = MODE == MODE_L1 ? ld_nc16(wp + (u64)cc * 32) : ld_stream16(wp + (u64)cc * 32);
        grp.s[u] = ld_stream_u16(sp + (u64)cc * 32);
        const int k = cc * 64 + t * 16;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const int m = nt * 8 + g;
            const bool ok = m < p.M && k < p.K;
            const u16* src = p.x + (u64)m * p.K + k;
            grp.xv[u][nt][0] = ok ? ld_nc16(src) : zero4;
            grp.xv[u][nt][1] = ok ? ld_nc16(src + 8) : zero4;
        }
    }
}

// S = 4 / NT independent accumulator sets (k-step st -> set st % S) keep the dependent HMMA chains short
template <int NT, int U, int S, int MODE>
__device__ __forceinline__ void compute_group(const Group<NT, U>& grp, int c, int cb, const u32* lut,
                                              float (&acc)[S][NT][4]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        if (c + u >= cb) break;
        if (MODE == MODE_LOADONLY) {
            const u32 v = grp.w[u].x ^ grp.w[u].y ^ grp.w[u].z ^ grp.w[u].w ^ grp.s[u] ^ grp.xv[u][0][0].x;
            acc[0][0][0] += __uint_as_float(v & 0x3F800000u);
            continue;
        }
        const u32 sg = lut[grp.s[u] & 0xFFu], sg8 = lut[grp.s[u] >> 8];
#pragma unroll
        for (int st = 0; st < 4; ++st) {
            u32 a[4];
            decode_word(word_of(grp.w[u], st), sg, sg8, a);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const uint4& b = grp.xv[u][nt][st >> 1];
                mma_bf16(acc[st % S][nt], a, (st & 1) ? b.z : b.x, (st & 1) ? b.w : b.y);
            }
        }
    }
}

// two half-buffers of U chunks: the loads of one are in flight while the other is decoded and multiplied
template <int NT, int U, int MODE>
__device__ __forceinline__ void gemv_segment(const GemvArgs& p, int tile, int ca, int cb, const u32* lut,
                                             float (&out)[NT][4]) {
    constexpr int S = 4 / NT;
    const int lane = threadIdx.x & 31;
    const uint4* wp = p.wq + (u64)tile * p.Kc * 32 + lane;
    const u16* sp = p.wsc + (u64)tile * p.Kc * 32 + lane;
    float acc[S][NT][4];
#pragma unroll
    for (int j = 0; j < S; ++j)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) acc[j][nt][0] = acc[j][nt][1] = acc[j][nt][2] = acc[j][nt][3] = 0.0f;
    Group<NT, U> g0, g1;
    load_group<NT, U, MODE>(p, wp, sp, ca, cb, g0);
    load_group<NT, U, MODE>(p, wp, sp, ca + U, cb, g1);
    for (int c = ca; c < cb; c += 2 * U) {
        compute_group<NT, U, S, MODE>(g0, c, cb, lut, acc);
        load_group<NT, U, MODE>(p, wp, sp, c + 2 * U, cb, g0);
        compute_group<NT, U, S, MODE>(g1, c + U, cb, lut, acc);
        load_group<NT, U, MODE>(p, wp, sp, c + 3 * U, cb, g1);
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float v = 0.0f;
#pragma unroll
            for (int j = 0; j < S; ++j) v += acc[j][nt][i];
            out[nt][i] = v;
        }
}

// lane's accumulator element i of n8 tile nt -> (m, n) of y
__device__ __forceinline__ int acc_m(int nt, int i) { return nt * 8 + 2 * (threadIdx.x & 3) + (i & 1); }
__device__ __forceinline__ int acc_n(int tile, int i) { return tile * 16 + ((threadIdx.x & 31) >> 2) + (i >> 1) * 8; }

// y rows of this lane's accumulators for 16-row tile `tile`, scaled by alpha[tile]
struct YOut {
    u16* y;
    const float* alpha;
    int M, N;
};

template <int NT>
__device__ __forceinline__ void store_y(const YOut& o, int tile, const float (&acc)[NT][4]) {
    const float al = o.alpha[tile];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int m = acc_m(nt, i), n = acc_n(tile, i);
            if (m < o.M && n < o.N) o.y[(u64)m * o.N + n] = f32_to_bf16(acc[nt][i] * al);
        }
}

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

template <int NT, int U, int MODE>
__device__ void gemv_body(const GemvArgs& p) {
    __shared__ u32 lut[256];
    __shared__ int s_last;
    lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    __syncthreads();
    const long long total = (long long)(p.Np / 128) * p.Kc;
    long long i = total * blockIdx.x / gridDim.x;
    const long long end = total * (blockIdx.x + 1) / gridDim.x;
    constexpr int SEG_MODE = MODE == MODE_ATOMIC ? MODE_NORMAL : MODE;
    while (i < end) {
        const int rg = (int)(i / p.Kc), ca = (int)(i % p.Kc);
        const int cb = (int)min((long long)p.Kc, ca + (end - i));
        float acc[NT][4];
        gemv_segment<NT, U, SEG_MODE>(p, rg * 8 + (threadIdx.x >> 5), ca, cb, lut, acc);
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
