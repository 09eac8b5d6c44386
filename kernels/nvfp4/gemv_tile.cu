// NVFP4 GEMV v5 ("tile"), M = 1..16 rows (decode), no split-K across blocks: y[M, N] = x[M, K] W^T, bf16 out.
//
// Grid: G = gridDim.x blocks, at most as many as fit the GPU at once (one wave, sized by ops.py); block b owns the
// 16-row tiles [b*T/G, (b+1)*T/G) (T = Np/16 tiles) over the whole K. Block = 256 threads = 8 warps; warp w takes
// chunks [w*Kc/8, (w+1)*Kc/8) of every tile of its block, so a tile's 8 partial sums meet in shared memory (one
// __syncthreads per tile, a double-buffered red[]) and no workspace, atomic, fence or counter is needed.
// Weight fragments and scale words stream through a per-warp ring of D stages filled by cp.async (16 B fragment +
// 4 B scale word per lane; each lane reads back only the bytes it copied, so the ring needs no barrier); the ring
// runs across tile boundaries, so a block's loads never drain between tiles. x[M, K] is staged into shared memory
// once per block (rows padded by 16 B). Lane (g, t) decodes its fragment (common.cuh) and runs mma.m16n8k16 with
// B = x^T: NT n8 tiles (NT = 1: M <= 8, 2: M <= 16), lane row nt*8 + g, zeros for rows >= M.
// Needs K % 8 == 0 and x 16-byte aligned (ops.py checks, and sizes the shared memory).
#include "common.cuh"

constexpr int TG_WARPS = 8;
constexpr int TG_STAGE = 640;  // bytes per ring stage: 32 lanes x 16 B fragments, then 32 lanes x 4 B scale words

struct TileArgs {
    const uint4* wq;     // [Np/16, Kc, 32] fragments
    const u16* wsc;      // [Np/16, Kc, 32] scale pairs
    const u16* x;        // [M, K] bf16
    u16* y;              // [M, N] bf16
    const float* alpha;  // [Np/16]
    int M, N, K, Kc, ntiles;
};

// its own cvta asm (common.cuh's smem_u32, the intrinsic, compiles this kernel differently; unmeasured)
__device__ __forceinline__ u32 tile_smem_u32(const void* p) {
    u32 d;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(d) : "l"(p));
    return d;
}

__device__ __forceinline__ void tg_cp16(u32 dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void tg_cp4(u32 dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void tg_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void tg_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// x[M, K] -> xs[M][ks] (ks = Kc*64 + 8 elements), k >= K zero-filled; one cp.async group
__device__ __forceinline__ void stage_x(const TileArgs& p, u32 xs, int ks) {
    const int per_row = p.Kc * 8;  // 16-byte pieces per padded row
    for (int i = threadIdx.x; i < p.M * per_row; i += blockDim.x) {
        const int m = i / per_row, k = (i - m * per_row) * 8;
        const bool ok = k < p.K;
        tg_cp16(xs + (u32)(m * ks + k) * 2u, ok ? p.x + (u64)m * p.K + k : p.x, ok ? 16 : 0);
    }
    tg_commit();
}

// chunk c of tile `tile` -> ring stage at `slot` (this lane's 16 B fragment and the 4 B word holding its scale pair)
__device__ __forceinline__ void issue_chunk(const TileArgs& p, u32 slot, int tile, int c) {
    const int lane = threadIdx.x & 31;
    const u64 idx = ((u64)tile * p.Kc + c) * 32;
    tg_cp16(slot + lane * 16, p.wq + idx + lane, 16);
    tg_cp4(slot + 512 + lane * 4, p.wsc + idx + (lane & ~1));
}

// one 64-k chunk from ring stage `slot`: decode the fragment, 4 k-steps x NT MMAs (k-step st into accumulator set
// st); NT n8 tiles of x rows (nt*8 + g). LOADONLY (timing diagnostic, wrong results): no decode, no MMA.
template <int NT, bool LOADONLY>
__device__ __forceinline__ void chunk_mma(const TileArgs& p, u32 slot, const u16* xs, int ks, int c, const u32* lut,
                                          float (&acc)[4][NT][4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    uint4 wv;
    u32 sw;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(wv.x), "=r"(wv.y), "=r"(wv.z), "=r"(wv.w)
                 : "r"(slot + lane * 16));
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(sw) : "r"(slot + 512 + lane * 4));
    sw = (lane & 1) ? sw >> 16 : sw & 0xFFFFu;
    uint4 b[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        b[nt][0] = b[nt][1] = make_uint4(0u, 0u, 0u, 0u);
        if (nt * 8 + g < p.M) {
            const uint4* xp = (const uint4*)(xs + (nt * 8 + g) * ks + c * 64 + t * 16);
            b[nt][0] = xp[0];
            b[nt][1] = xp[1];
        }
    }
    if (LOADONLY) {
        acc[0][0][0] += __uint_as_float((wv.x ^ wv.y ^ wv.z ^ wv.w ^ sw ^ b[0][0].x) & 0x3F800000u);
        return;
    }
    const u32 sg = lut[sw & 0xFFu], sg8 = lut[sw >> 8];
#pragma unroll
    for (int st = 0; st < 4; ++st) {
        u32 a[4];
        decode_word(word_of(wv, st), sg, sg8, a);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const uint4& bb = b[nt][st >> 1];
            mma_bf16(acc[st][nt], a, (st & 1) ? bb.z : bb.x, (st & 1) ? bb.w : bb.y);
        }
    }
}

// the 8 warps' partial sums of one tile meet in red (one of two buffers, alternating per tile); warp (tile % 8)
// adds them and writes y
template <int NT>
__device__ __forceinline__ void finish_tile(const TileArgs& p, int tile, float al, float (&acc)[4][NT][4],
                                            float4 (*red)[NT][32]) {
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        float4 v;
        v.x = acc[0][nt][0] + acc[1][nt][0] + acc[2][nt][0] + acc[3][nt][0];
        v.y = acc[0][nt][1] + acc[1][nt][1] + acc[2][nt][1] + acc[3][nt][1];
        v.z = acc[0][nt][2] + acc[1][nt][2] + acc[2][nt][2] + acc[3][nt][2];
        v.w = acc[0][nt][3] + acc[1][nt][3] + acc[2][nt][3] + acc[3][nt][3];
        red[w][nt][lane] = v;
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[j][nt][0] = acc[j][nt][1] = acc[j][nt][2] = acc[j][nt][3] = 0.0f;
    }
    __syncthreads();
    if (w != (tile & (TG_WARPS - 1))) return;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        float o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int ww = 0; ww < TG_WARPS; ++ww) {
            const float4 r = red[ww][nt][lane];
            o[0] += r.x, o[1] += r.y, o[2] += r.z, o[3] += r.w;
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int m = nt * 8 + 2 * (lane & 3) + (i & 1), n = tile * 16 + (lane >> 2) + (i >> 1) * 8;
            if (m < p.M && n < p.N) p.y[(u64)m * p.N + n] = f32_to_bf16(o[i] * al);
        }
    }
}

template <int D, int NT, bool LOADONLY>
__device__ void gemv_tile_body(const TileArgs& p) {
    extern __shared__ __align__(16) unsigned char dyn[];
    __shared__ u32 lut[256];
    __shared__ float4 red[2][TG_WARPS][NT][32];
    const int w = threadIdx.x >> 5;
    pdl_launch_dependents();
    pdl_wait();  // PDL launch (ops.py): only the launch itself overlaps the kernel before
    lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    const int t0 = (int)((long long)p.ntiles * blockIdx.x / gridDim.x);
    const int nt = (int)((long long)p.ntiles * (blockIdx.x + 1) / gridDim.x) - t0;
    const int ca = w * p.Kc / TG_WARPS, nw = (w + 1) * p.Kc / TG_WARPS - ca;  // this warp's chunks of each tile
    const int ks = p.Kc * 64 + 8, total = nt * nw;
    const u16* xs = (const u16*)dyn;
    const u32 ring = tile_smem_u32(dyn) + (u32)(p.M * ks * 2) + (u32)(w * D * TG_STAGE);
    stage_x(p, tile_smem_u32(dyn), ks);
    int it = 0, ic = 0, issued = 0;  // issue cursor: tile offset, chunk offset, items issued
#pragma unroll
    for (int s = 0; s < D; ++s) {
        if (issued < total) {
            issue_chunk(p, ring + s * TG_STAGE, t0 + it, ca + ic);
            ++issued;
            if (++ic == nw) ic = 0, ++it;
        }
        tg_commit();
    }
    tg_wait<D>();  // this thread's x pieces have landed
    __syncthreads();  // everyone's x pieces and the LUT are visible
    float acc[4][NT][4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) acc[j][nt][0] = acc[j][nt][1] = acc[j][nt][2] = acc[j][nt][3] = 0.0f;
    int slot = 0;
    for (int j = 0; j < nt; ++j) {
        const float al = p.alpha[t0 + j];
        for (int c = 0; c < nw; ++c) {
            tg_wait<D - 1>();  // the oldest group in flight (this chunk) has landed
            const u32 sa = ring + slot * TG_STAGE;
            chunk_mma<NT, LOADONLY>(p, sa, xs, ks, ca + c, lut, acc);
            // refill the stage just read: its values are already consumed by the MMAs issued above
            if (issued < total) {
                issue_chunk(p, sa, t0 + it, ca + ic);
                ++issued;
                if (++ic == nw) ic = 0, ++it;
            }
            tg_commit();
            slot = slot + 1 == D ? 0 : slot + 1;
        }
        finish_tile<NT>(p, t0 + j, al, acc, red[j & 1]);
    }
}

#define TILE_PARAMS const uint4* wq, const u16* wsc, const u16* x, u16* y, const float* alpha, int M, int N, int K, \
                    int Kc, int ntiles
#define TILE_ARGS TileArgs{wq, wsc, x, y, alpha, M, N, K, Kc, ntiles}
// NT = 1 (M <= 8): registers capped at 64 so 4 blocks (32 warps) fit an SM when shared memory allows; NT = 2
// (M <= 16): x takes most of the shared memory, so 1-2 blocks per SM and 128 registers
#define TILE_KERNEL(name, D, NT, MINB, LOADONLY) \
    extern "C" __global__ void __launch_bounds__(256, MINB) name(TILE_PARAMS) { \
        gemv_tile_body<D, NT, LOADONLY>(TILE_ARGS); \
    }
TILE_KERNEL(nvfp4_gemv_tile_d6, 6, 1, 4, false)
TILE_KERNEL(nvfp4_gemv_tile_d10, 10, 1, 4, false)
TILE_KERNEL(nvfp4_gemv_tile_d6_loadonly, 6, 1, 4, true)
TILE_KERNEL(nvfp4_gemv_tile_nt2_d8, 8, 2, 2, false)
