// NVFP4 GEMV v10r ("block columns, rows"), M = 2..8 rows: y[M, N] = x[M, K] W^T, f32 sums, bf16 out.
//
// gemv_bc.cu's idea for a few rows: the codes enter mma.m16n8k16 unscaled (decode_word_raw, 9 ALU ops per word;
// A = e2m1 * 2^-126, x staged as x * 2^100) and the block scales are applied to C. Here an n8 tile of B covers 2 x
// rows and the 4 scale blocks of one 64-k chunk: column j = 2b + m' is x row 2 nt + m' restricted to block b, so
// lane (g, t) feeds x row 2 nt + (g & 1) where g / 2 == t (zeros elsewhere, or past M), and its C values (rows g,
// g + 8 x columns 2t, 2t + 1) are block t of x rows 2 nt, 2 nt + 1: both multiplied by the lane's own scale pair
// (the split-K kernels' wsc layout, unchanged). NTB tiles (1: M <= 2, 2: M <= 4, 4: M <= 8); after a segment the 4
// lanes t of a row add their blocks (two shuffles) and lane t keeps tile t, which is store_y's layout for M <= 8
// (rows 2t, 2t + 1). Work split, workspace, flush and programmatic dependent launch: as gemv_bc.cu (items = (row
// group, chunk)). x rows are staged in shared memory with a 16-byte pad (Kc * 8 + 1 pieces each); gemv_bc.py checks
// the size, K % 8 == 0 and 16-byte alignment.
#include "gemv_bc_common.cuh"

template <int U>
struct ChunkGroup {
    uint4 w[U];
    u32 s[U];
};

// x[M, K] * 2^100 -> xs rows of rs 16-byte pieces (zero past K), then 2 zero pieces; all threads (the caller syncs)
__device__ __forceinline__ void stage_rows_scaled(const GemvArgs& p, uint4* xs, int rs) {
    for (int i = threadIdx.x; i < p.M * rs + 2; i += blockDim.x) {
        const int m = i / rs, k = (i - m * rs) * 8;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (m < p.M && k < p.K) {
            v = ld_nc16(p.x + (u64)m * p.K + k);
            v.x = bmul2(v.x, X_SCALE), v.y = bmul2(v.y, X_SCALE), v.z = bmul2(v.z, X_SCALE);
            v.w = bmul2(v.w, X_SCALE);
        }
        xs[i] = v;
    }
}

template <int U>
__device__ __forceinline__ void load_chunks(const uint4* wp, const u16* sp, int c, int cb, ChunkGroup<U>& grp) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        if (c + u >= cb) break;
        grp.w[u] = ld_stream16(wp + (u64)(c + u) * 32);
        grp.s[u] = ld_stream_u16(sp + (u64)(c + u) * 32);
    }
}

// xb[nt]: shared address of this lane's B source for tile nt at chunk 0 (x or the zero pieces), advancing step[nt]
template <int NTB, int U, int MODE>
__device__ __forceinline__ void compute_chunks(const ChunkGroup<U>& grp, int c, int cb, const u32 (&xb)[NTB],
                                               const u32 (&step)[NTB], float (&acc)[NTB][4]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        if (c + u >= cb) break;
        uint4 b[NTB][2];
#pragma unroll
        for (int nt = 0; nt < NTB; ++nt) {
            const u32 xa = xb[nt] + (u32)(c + u) * step[nt];
            b[nt][0] = lds16(xa), b[nt][1] = lds16(xa + 16);
        }
        if (MODE == MODE_LOADONLY) {
            const uint4& w = grp.w[u];
            acc[0][0] += __uint_as_float((w.x ^ w.y ^ w.z ^ w.w ^ grp.s[u] ^ b[0][0].x) & 0x3F800000u);
            continue;
        }
        float cf[2][NTB][4];
#pragma unroll
        for (int st = 0; st < 4; ++st) {
            u32 a[4];
            decode_word_raw(word_of(grp.w[u], st), a);
#pragma unroll
            for (int nt = 0; nt < NTB; ++nt) {
                const uint4& bb = b[nt][st >> 1];
                if (st < 2)
                    mma_bf16_first(cf[st & 1][nt], a, (st & 1) ? bb.z : bb.x, (st & 1) ? bb.w : bb.y);
                else
                    mma_bf16(cf[st & 1][nt], a, (st & 1) ? bb.z : bb.x, (st & 1) ? bb.w : bb.y);
            }
        }
        const float2 s = e4m3x2_to_float2(grp.s[u]);  // .x row g, .y row g + 8
#pragma unroll
        for (int nt = 0; nt < NTB; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[nt][i] = fmaf(cf[0][nt][i] + cf[1][nt][i], i < 2 ? s.x : s.y, acc[nt][i]);
    }
}

// chunks [ca, cb) of 16-row tile `tile` -> out (store_y / gemv_flush layout, NT = 1). first: the block's first
// segment stages x after issuing its first weight loads (and after the kernel before has completed).
template <int NTB, int U, int MODE>
__device__ __forceinline__ void rows_segment(const GemvArgs& p, int tile, int ca, int cb, uint4* xs, bool first,
                                             float (&out)[1][4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, rs = p.Kc * 8 + 1;
    const uint4* wp = p.wq + (u64)tile * p.Kc * 32 + lane;
    const u16* sp = p.wsc + (u64)tile * p.Kc * 32 + lane;
    ChunkGroup<U> g0, g1;
    load_chunks<U>(wp, sp, ca, cb, g0);
    load_chunks<U>(wp, sp, ca + U, cb, g1);
    if (first) {
        pdl_wait();
        stage_rows_scaled(p, xs, rs);
        __syncthreads();
    }
    u32 x0;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(x0) : "l"(xs));
    u32 xb[NTB], step[NTB];
#pragma unroll
    for (int nt = 0; nt < NTB; ++nt) {
        const int m = 2 * nt + (g & 1);
        const bool on = (g >> 1) == t && m < p.M;
        xb[nt] = on ? x0 + (u32)(m * rs + 2 * t) * 16u : x0 + (u32)(p.M * rs) * 16u;
        step[nt] = on ? 128u : 0u;
    }
    float acc[NTB][4];
#pragma unroll
    for (int nt = 0; nt < NTB; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
    for (int c = ca; c < cb; c += 2 * U) {
        compute_chunks<NTB, U, MODE>(g0, c, cb, xb, step, acc);
        load_chunks<U>(wp, sp, c + 2 * U, cb, g0);
        compute_chunks<NTB, U, MODE>(g1, c + U, cb, xb, step, acc);
        load_chunks<U>(wp, sp, c + 3 * U, cb, g1);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float v = 0.0f;
#pragma unroll
        for (int nt = 0; nt < NTB; ++nt) {
            float a = acc[nt][i];
            a += __shfl_xor_sync(0xFFFFFFFFu, a, 1);
            a += __shfl_xor_sync(0xFFFFFFFFu, a, 2);
            v = nt == t ? a : v;
        }
        out[0][i] = v;
    }
}

template <int NTB, int U, int MODE>
__device__ void gemv_bcr_body(const GemvArgs& p) {
    __shared__ int s_last;
    extern __shared__ uint4 xs[];
    const long long total = (long long)(p.Np / 128) * p.Kc;
    long long i = total * blockIdx.x / gridDim.x;
    const long long end = total * (blockIdx.x + 1) / gridDim.x;
    bool first = true;
    pdl_launch_dependents();
    if (i >= end) pdl_wait();
    while (i < end) {
        const int rg = (int)(i / p.Kc), ca = (int)(i % p.Kc);
        const int cb = (int)min((long long)p.Kc, ca + (end - i));
        const int tile = rg * 8 + (threadIdx.x >> 5);
        float acc[1][4];
        rows_segment<NTB, U, MODE>(p, tile, ca, cb, xs, first, acc);
        first = false;
        if (cb - ca == p.Kc)
            store_y<1>(YOut{p.y, p.alpha, p.M, p.N}, tile, acc);
        else if (MODE != MODE_NOFLUSH)
            gemv_flush<1>(p, rg, cb - ca, acc, &s_last);
        i += cb - ca;
    }
}

#define BCR_PARAMS const uint4* wq, const u16* wsc, const u16* x, u16* y, float* ws, int* counters, \
                   const float* alpha, int M, int N, int K, int Np, int Kc
#define BCR_ARGS GemvArgs{wq, wsc, x, y, ws, counters, alpha, M, N, K, Np, Kc}
// NTB n8 tiles of 2 x rows; U = chunks per half-buffer (2U fragments of 512 B in flight per warp)
#define BCR_KERNEL(name, NTB, U, MODE) \
    extern "C" __global__ void __launch_bounds__(256, 2) name(BCR_PARAMS) { gemv_bcr_body<NTB, U, MODE>(BCR_ARGS); }
BCR_KERNEL(nvfp4_gemv_bcr_nt1, 1, 6, MODE_NORMAL)
BCR_KERNEL(nvfp4_gemv_bcr_nt2, 2, 4, MODE_NORMAL)
BCR_KERNEL(nvfp4_gemv_bcr_nt4, 4, 2, MODE_NORMAL)
