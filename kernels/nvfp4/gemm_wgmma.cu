// NVFP4 weight x bf16 activations on Hopper tensor cores (wgmma, sm_90a) for M > 32 rows (prefill):
// y[M, N] = x[M, K] W^T, f32 accumulate, bf16 out; W in ops.repack's layout (common.cuh), alpha per 16-row tile.
//
// Grid: one block per (128 weight rows, T tokens) tile, T = 32 / 64 / 128 / 256 (one kernel each), blocks rastered in
// groups of `group` row tiles (weights of a group stay in L2 while it sweeps the tokens). Block = 256 threads = 2
// warpgroups; warpgroup w owns weight rows [64 w, +64) of the tile, its warp q the 16-row tile 8 rb + 4 w + q.
// The weights are wgmma's A operand straight from registers: each lane's 16-byte fragment already is its m64nTk16 A
// fragment for the 4 k-steps of a 64-k chunk (rows g, g+8; decode_word). x is B (K-major, 128-byte swizzle): token
// row r of a chunk is one 128-byte line whose 16-byte unit u holds the 4-byte x pairs of real k 16t + 2u (t = 0..3),
// i.e. the repacked layout's k permutation (k-step st = units 2st, 2st+1): nvfp4_permute_x writes x in that order
// once (xp) and the GEMM copies 16-byte units; the _x4 kernels instead permute x as is with 4-byte cp.async.
// Pipeline: S stages of [x tile T x 128 B | 8 weight tiles x 512 B | 8 x 64 B scales], filled S-2 chunks ahead by
// cp.async; per chunk every thread decodes its fragment into one of two A register sets and its warpgroup issues 4
// wgmma (one commit group) while the previous chunk's group may still run (wait_group 1). Epilogue: alpha, bf16,
// staged through shared memory for 16-byte row stores.
// Split-K (the _sk kernels, splits = S > 1; gemm_wgmma.pick chooses S where the grid would fill under ~2 waves):
// block b works on output tile b / S over the Kc chunks [s Kc / S, (s + 1) Kc / S), s = b % S, then adds its f32
// accumulators into the zeroed workspace ws [tiles, T / 8, 256 threads] float4 (one red.global.add.v4.f32 per 4
// sums, 8-token groups past M skipped) and bumps counters[tile] (barrier + fence first, as gemv.cu's v7 flush); the
// S-th block of a tile reads the sums back (ld.cg), re-zeroes them (st.cg) and the counter, and runs the epilogue.
// Also built into this module: gemm_out.cuh (split-K flush, tile raster, epilogue), gemm_stream_k.cuh (the _skm
// kernels) and gemm_ws.cuh (the warp-specialised _ws kernels).
#include "wgmma_ptx.cuh"

#define THREADS 256
#define PITCH 136  // epilogue tile row: 128 weight rows + 8 pad (bf16)

// per-thread sources of the cp.async copies (chunk 0), set once per block. XP (x pre-permuted by nvfp4_permute_x):
// thread i copies 16-byte unit i & 7 of rows r = (i >> 3) + 32 j; else (x as is) warp w copies the 4-byte k pairs
// (lane) of rows r = w + 8 j
struct Src {
    const char* x;     // first x row of this thread, at its piece of chunk 0
    const char* w;     // weight fragment (row tile tile0 + warp, chunk 0, this lane)
    const char* s;     // scale pairs of lanes 2 lane', 2 lane' + 1 (lane' = lane & 15)
    u64 x_step;        // bytes between this thread's x rows (32 rows for XP, else 8)
    int rows_left;     // rows r0 + j * step exist while j * step < rows_left
    int k_left;        // x as is: K - 2 lane, the lane's pair of chunk c exists while 64c < k_left
    u32 x_dst;         // byte offset of the thread's piece in its first row of a stage (swizzled)
};

// cp.async of chunk c into one stage: the x tile [T rows][128 B], row r's 16-byte unit u at (u ^ (r & 7)) (128-byte
// swizzle; unit u = the k pairs 64c + 16t + 2u, t = 0..3, i.e. the repacked layout's k order: XP copies it as is,
// else the 4-byte pair of k 64c + 2l goes to unit l & 7, word l >> 3), then the 8 weight fragments (each lane its own
// 16 bytes) and scale pairs (16 lanes x 4 bytes per tile). Rows past M (and x as is: k past K) are zero-filled.
template <int T, bool XP, int DIAG>
__device__ __forceinline__ void issue_chunk(u32 stage, const Src& src, int c) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const char* xs = src.x + 128 * (u64)c;
    const u32 dst = stage + src.x_dst;
    if constexpr (DIAG == 1) {
    } else if constexpr (XP) {
#pragma unroll
        for (int j = 0; j < T / 32; ++j) cp_async16_zfill(dst + j * 4096, xs + j * src.x_step, 32 * j < src.rows_left);
    } else {
        const bool kok = 64 * c < src.k_left;
#pragma unroll
        for (int j = 0; j < T / 8; ++j) cp_async4(dst + j * 1024, xs + j * src.x_step, kok && 8 * j < src.rows_left);
    }
    cp_async16(stage + T * 128 + warp * 512 + lane * 16, src.w + 512 * (u64)c);
    if (lane < 16) cp_async4(stage + T * 128 + 4096 + warp * 64 + lane * 4, src.s + 64 * (u64)c, true);
}

// this warp's weight fragment and scale pair in stage st (T tokens) -> the A registers of the chunk's 4 k-steps
// (gemm_ws.cuh's MMA warps too)
template <int T>
__device__ __forceinline__ void decode_stage_fragment(u32 st, const u32* lut, u32 (&a)[4][4]) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const uint4 f = lds128(st + T * 128 + warp * 512 + lane * 16);
    const u32 sc = lds_u16(st + T * 128 + 4096 + warp * 64 + lane * 2);
    const u32 sg = lut[sc & 0xFFu], sg8 = lut[sc >> 8];
    decode_word(f.x, sg, sg8, a[0]);
    decode_word(f.y, sg, sg8, a[1]);
    decode_word(f.z, sg, sg8, a[2]);
    decode_word(f.w, sg, sg8, a[3]);
}

// one 64-k chunk: wait for its stage, decode (a warp's fragments and scales were copied by the warp itself, so
// __syncwarp suffices there), block barrier (x came from every warp), 4 async wgmma, refill the stage that chunk c - 2
// used (its wgmma group retired before the barrier), keep this chunk's group in flight (wait_group 1)
template <int T, int S, bool FENCE, bool XP, int DIAG>
__device__ __forceinline__ void chunk_step(int c, u32 (&a)[4][4], float (&acc)[T / 2], u32 base, int& rd, int& wr,
                                           const u32* lut, const Src& src, int Kc) {
    constexpr int SB = T * 128 + 5120, PD = S - 2;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    asm volatile("cp.async.wait_group %0;" :: "n"(PD - 1) : "memory");
    __syncwarp();
    const u32 st = base + rd * SB;
    rd = rd + 1 == S ? 0 : rd + 1;
    if constexpr (DIAG == 4) {  // copies only (timing diagnostic): no fragment reads, no decode, no wgmma
        a[0][0] = a[0][0] * 3u + (u32)c;
    } else if constexpr (DIAG == 2) {
        const uint4 f = lds128(st + T * 128 + warp * 512 + lane * 16);
        const u32 sc = lds_u16(st + T * 128 + 4096 + warp * 64 + lane * 2);
        const u32 sg = lut[sc & 0xFFu], sg8 = lut[sc >> 8];
        a[0][0] = a[1][1] = a[2][2] = a[3][3] = f.x ^ sg;
        a[0][1] = a[1][2] = a[2][3] = a[3][0] = f.y ^ sg8;
        a[0][2] = a[1][3] = a[2][0] = a[3][1] = f.z;
        a[0][3] = a[1][0] = a[2][1] = a[3][2] = f.w;
    } else {
        decode_stage_fragment<T>(st, lut, a);
    }
    u64 desc[4];
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) desc[ks] = desc_sw128(st + 32 * ks);  // k-step ks: +32 bytes into each row
    // every A register and descriptor is final before the batch opens (ptxas serializes wgmma otherwise)
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
        asm volatile("" : "+l"(desc[ks]));
        asm volatile("" : "+r"(a[ks][0]), "+r"(a[ks][1]), "+r"(a[ks][2]), "+r"(a[ks][3]));
    }
    // the stage was written through the generic proxy and wgmma reads it through the async proxy: the memory model
    // asks for this fence (FENCE = false: the _nf kernels, without it, as CUTLASS's cp.async + GMMA mainloop does)
    if constexpr (FENCE) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if constexpr (DIAG >= 3) {  // no wgmma (timing diagnostic): the decoded words feed one add
        acc[0] += __uint_as_float((a[0][0] ^ a[1][1] ^ a[2][2] ^ a[3][3] ^ a[0][3]) & 0x3F800000u);
    } else {
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) wgmma_tile<T>(acc, a[ks], desc[ks]);
    }
    wgmma_commit();
    if (c + PD < Kc) issue_chunk<T, XP, DIAG>(base + wr * SB, src, c + PD);
    asm volatile("cp.async.commit_group;" ::: "memory");
    wr = wr + 1 == S ? 0 : wr + 1;
    wgmma_wait<1>();
}

#include "gemm_out.cuh"

// this thread's copy sources for the tile at row tile rb, token m0, starting at chunk c0 (see Src)
template <bool XP>
__device__ __forceinline__ Src make_src(const unsigned char* wq, const unsigned char* wsc, const u16* x, int M, int K,
                                        int Kc, int rb, int m0, int c0) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, tile0 = rb * 8;
    Src src;
    if constexpr (XP) {  // x = the permuted copy, rows of Kc * 64
        const int r0 = threadIdx.x >> 3, u = threadIdx.x & 7;
        src.x = (const char*)(x + (u64)(m0 + r0) * Kc * 64) + 16 * u;
        src.x_step = (u64)Kc * 128 * 32;
        src.rows_left = M - m0 - r0;
        src.x_dst = r0 * 128 + ((u ^ (r0 & 7)) << 4);
    } else {
        src.x = (const char*)(x + (u64)(m0 + warp) * K) + 4 * lane;
        src.x_step = (u64)K * 16;
        src.rows_left = M - m0 - warp;
        src.x_dst = warp * 128 + (((lane & 7) ^ warp) << 4) + 4 * (lane >> 3);
    }
    src.k_left = K - 2 * lane - 64 * c0;
    src.x += 128 * (u64)c0;
    src.w = (const char*)wq + ((u64)(tile0 + warp) * Kc * 32 + lane) * 16 + 512 * (u64)c0;
    src.s = (const char*)wsc + ((u64)(tile0 + warp) * Kc * 32 + 2 * (lane & 15)) * 2 + 64 * (u64)c0;
    return src;
}

// acc = the sums of the nc chunks src starts at (every stage drained and the block synchronised at the end)
template <int T, int S, bool FENCE, bool XP, int DIAG>
__device__ __forceinline__ void mainloop(float (&acc)[T / 2], const Src& src, int nc, u32 base, const u32* lut) {
    constexpr int SB = T * 128 + 5120, PD = S - 2;
#pragma unroll
    for (int i = 0; i < T / 2; ++i) acc[i] = 0.0f;
    u32 a0[4][4], a1[4][4];
#pragma unroll
    for (int s = 0; s < PD; ++s) {
        if (s < nc) issue_chunk<T, XP, DIAG>(base + s * SB, src, s);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    __syncthreads();  // lut (first tile) / the previous tile's epilogue reads of shared memory
    int rd = 0, wr = PD;
    int c = 0;
    for (; c + 1 < nc; c += 2) {
        chunk_step<T, S, FENCE, XP, DIAG>(c, a0, acc, base, rd, wr, lut, src, nc);
        chunk_step<T, S, FENCE, XP, DIAG>(c + 1, a1, acc, base, rd, wr, lut, src, nc);
    }
    if (c < nc) chunk_step<T, S, FENCE, XP, DIAG>(c, a0, acc, base, rd, wr, lut, src, nc);
    wgmma_wait<0>();
    fence_regs(acc);
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
}

// SK: split-K kernel (splits > 1 blocks per output tile, see the header); else splits, ws and counters are unused
template <int T, int S, bool FENCE, bool XP, int DIAG, bool SK>
__device__ __forceinline__ void gemm_body(const unsigned char* wq, const unsigned char* wsc, const u16* x, u16* y,
                                          const float* alpha, int M, int N, int K, int Kc, int R, int group,
                                          int vec_out, float* ws, int* counters, int splits) {
    extern __shared__ unsigned char dsmem[];
    __shared__ u32 lut[256];
    __shared__ int s_last;
    lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    const u32 raw = smem_u32(dsmem), base = (raw + 1023u) & ~1023u;  // swizzle atoms need 1024-byte alignment
    // output tile and, split-K, this block's chunk range [c0, c0 + nc)
    const unsigned bid = SK ? blockIdx.x / splits : blockIdx.x;
    const int split = SK ? (int)(blockIdx.x - bid * splits) : 0;
    const int c0 = SK ? (int)((long long)Kc * split / splits) : 0;
    const int nc = SK ? (int)((long long)Kc * (split + 1) / splits) - c0 : Kc;
    const int2 o = tile_origin(bid, M, T, R, group);
    float acc[T / 2];
    mainloop<T, S, FENCE, XP, DIAG>(acc, make_src<XP>(wq, wsc, x, M, K, Kc, o.x, o.y, c0), nc, base, lut);
    if constexpr (SK) {
        if (!split_flush<T>(acc, ws, counters, (int)bid, splits, M - o.y, &s_last)) return;
    }
    epilogue<T>(acc, (u16*)(dsmem + (base - raw)), y, alpha, o.x, o.y, M, N, vec_out);
}

// ws, counters, splits: split-K only (the _sk kernels), ignored by the others
#define GEMM_ARGS const unsigned char *wq, const unsigned char *wsc, const u16 *x, u16 *y, const float *alpha, int M, \
    int N, int K, int Kc, int R, int group, int vec_out, float *ws, int *counters, int splits
#define GEMM_PASS wq, wsc, x, y, alpha, M, N, K, Kc, R, group, vec_out, ws, counters, splits

// x [M, K] -> xp [M, Kc * 64] (the XP kernels' input): 16-byte unit u of row m, chunk c holds the k pairs
// 64c + 16t + 2u, t = 0..3 (zeros past K). One thread per unit; K even, x 4-byte aligned.
extern "C" __global__ void __launch_bounds__(256) nvfp4_permute_x(const u16* x, u16* xp, int M, int K, int Kc) {
    const u64 i = (u64)blockIdx.x * 256 + threadIdx.x, mc = i >> 3;
    if (mc >= (u64)M * Kc) return;
    const int u = (int)(i & 7), c = (int)(mc % Kc);
    const u32* row = (const u32*)(x + (mc / Kc) * K);
    u32 w[4];
#pragma unroll
    for (int t = 0; t < 4; ++t) {
        const int k = 64 * c + 16 * t + 2 * u;
        w[t] = k < K ? __ldg(row + (k >> 1)) : 0u;
    }
    *(uint4*)(xp + mc * 64 + 8 * u) = make_uint4(w[0], w[1], w[2], w[3]);
}

// T = 32: 3 blocks per SM (8 stages of 9 KB, for few tokens: 3 blocks of 12 stages and 2 took 1-9% longer where the
// grid has blocks for 3, session 9); T = 64: 2 blocks per SM (8 stages of 13 KB; _s6: the 6 of session 2, A/B);
// T = 128: 6 stages of 21 KB; T = 256: 5 stages of 37 KB.
// Names: _x4 = x as is (4-byte copies), else x pre-permuted (16-byte copies); _nf = without the proxy fence;
// _nox (no x copies) and _nodec (raw fragment words as A, no decode): timing diagnostics, wrong results;
// _sk = split-K (x pre-permuted, fenced).
#define GEMM_KERNEL(name, t, s, minb, fence, xp, diag, sk) \
    extern "C" __global__ void __launch_bounds__(THREADS, minb) name(GEMM_ARGS) { \
        gemm_body<t, s, fence, xp, diag, sk>(GEMM_PASS); \
    }
GEMM_KERNEL(nvfp4_gemm_wgmma_t32, 32, 8, 3, true, true, 0, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t32_sk, 32, 8, 3, true, true, 0, true)
GEMM_KERNEL(nvfp4_gemm_wgmma_t64_s6, 64, 6, 2, true, true, 0, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t64_s6_sk, 64, 6, 2, true, true, 0, true)
GEMM_KERNEL(nvfp4_gemm_wgmma_t64, 64, 8, 2, true, true, 0, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t128, 128, 6, 1, true, true, 0, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t256, 256, 5, 1, true, true, 0, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t64_sk, 64, 8, 2, true, true, 0, true)
GEMM_KERNEL(nvfp4_gemm_wgmma_t128_sk, 128, 6, 1, true, true, 0, true)
GEMM_KERNEL(nvfp4_gemm_wgmma_t256_sk, 256, 5, 1, true, true, 0, true)
GEMM_KERNEL(nvfp4_gemm_wgmma_t32_nf, 32, 8, 3, false, true, 0, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t64_nf, 64, 8, 2, false, true, 0, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t128_nf, 128, 6, 1, false, true, 0, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t256_nf, 256, 5, 1, false, true, 0, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t32_x4, 32, 8, 3, true, false, 0, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t64_x4, 64, 8, 2, true, false, 0, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t128_x4, 128, 6, 1, true, false, 0, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t256_x4, 256, 5, 1, true, false, 0, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t256_nox, 256, 5, 1, true, true, 1, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t256_nodec, 256, 5, 1, true, true, 2, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t32_nox, 32, 8, 3, true, true, 1, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t32_nodec, 32, 8, 3, true, true, 2, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t64_nodec, 64, 8, 2, true, true, 2, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t32_nomma, 32, 8, 3, true, true, 3, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t32_copies, 32, 8, 3, true, true, 4, false)
GEMM_KERNEL(nvfp4_gemm_wgmma_t32_nf_copies, 32, 8, 3, false, true, 4, false)

#include "gemm_stream_k.cuh"
#include "gemm_ws.cuh"
#include "gemm_ws_sk.cuh"
#include "gemm_wsb.cuh"
