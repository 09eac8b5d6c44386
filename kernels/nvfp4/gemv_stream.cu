// gemv_stream.cu (v9): NVFP4 weight x bf16 activations for M = 1..16 rows (decode), y[M, N] = x[M, K] W^T, f32
// accumulate, bf16 out, with one block per SM and no reduction tail.
//
// Why (kernels/nvfp4/NOTES.md, session 5): v8's timelines (bench/gpu_gemv_trace.py) showed the two blocks an SM
// holds finishing a median 4.1 us apart (the scheduler favours one block's warps), and the split-K settle (fence,
// counter atomic, read-back: three dependent L2 round trips) at the end of every block adding ~4 us more.
// Here: one block of WARPS compute warps + 1 flush warp per SM. Items are (16-row tile, 64-k chunk), tile-major; block
// b owns items [b T / G, (b + 1) T / G) (T = Np/16 * Kc), cut into stages of up to BULK_C chunks of one tile
// (gemv_stage.cuh). The block's (at most two) boundary tiles, which it shares with its neighbours, come first in
// its stage order, then its interior tiles in order. Compute warps take stages from a shared-memory queue (atomicAdd:
// a slow warp takes fewer), each into its own ring of `depth` slots filled by bulk copies (lane 0), and add each
// stage's sums into the tile's shared-memory accumulator (SLOTS of them, tile % SLOTS, claimed by compare-and-swap);
// the warp that completes a tile's chunks writes y (interior tile) or hands the sums to the flush warp (boundary
// tile), which adds them into the f32 workspace, bumps the tile's counter (acq_rel) and, if its chunks complete the
// tile's Kc, reads the sums back, writes y and re-zeroes. The boundary tiles are done first, so their global round
// trips overlap the interior work.
// Workspace ws [Np/16 tiles][16 m][16 rows] f32 and counters [Np/16] int32: zero between calls.
#include "gemv_core.cuh"
#include "gemv_split.cuh"  // red_add_v4
#include "bulk_ptx.cuh"
#include "gemv_stage.cuh"

#define WARPS 16
#define MAX_DEPTH 6
#define SLOTS 16

struct Plan {              // the block's stages, in queue order
    int tA, cA, nA, uA;    // boundary tile A (the first, unless wholly the block's): chunks [cA, cA + nA), uA stages
    int tB, nB, uB;        // boundary tile B (the last, if partial and not A): chunks [0, nB)
    int t0, ut, total;     // interior tiles t0.. with ut stages each; all stages
};

__device__ __forceinline__ Plan make_plan(int i0, int i1, int Kc) {
    Plan q;
    q.ut = (Kc + BULK_C - 1) / BULK_C;
    q.tA = i0 / Kc, q.tB = (i1 - 1) / Kc;
    const int a_lo = i0 - q.tA * Kc, a_hi = min(i1, (q.tA + 1) * Kc) - q.tA * Kc;
    const bool a_part = a_lo != 0 || a_hi != Kc, b_part = q.tB != q.tA && i1 - q.tB * Kc != Kc;
    q.cA = a_lo, q.nA = a_part ? a_hi - a_lo : 0, q.uA = (q.nA + BULK_C - 1) / BULK_C;
    q.nB = b_part ? i1 - q.tB * Kc : 0, q.uB = (q.nB + BULK_C - 1) / BULK_C;
    q.t0 = a_part ? q.tA + 1 : q.tA;
    const int interior = max(0, (b_part ? q.tB - 1 : q.tB) - q.t0 + 1);
    q.total = q.uA + q.uB + interior * q.ut;
    return q;
}

// stage u of the plan -> chunks [c, c + n) of `tile`
__device__ __forceinline__ void stage_of(const Plan& q, int Kc, int u, int& tile, int& c, int& n) {
    if (u < q.uA) {
        tile = q.tA, c = q.cA + u * BULK_C, n = min(BULK_C, q.cA + q.nA - c);
        return;
    }
    u -= q.uA;
    if (u < q.uB) {
        tile = q.tB, c = u * BULK_C, n = min(BULK_C, q.nB - c);
        return;
    }
    u -= q.uB;
    const int j = u / q.ut;
    tile = q.t0 + j, c = (u - j * q.ut) * BULK_C, n = min(BULK_C, Kc - c);
}

// the block's chunks of `tile`; boundary index 0 (A), 1 (B) or -1 (interior)
__device__ __forceinline__ int chunks_of(const Plan& q, int Kc, int tile, int& boundary) {
    boundary = q.nA && tile == q.tA ? 0 : q.nB && tile == q.tB ? 1 : -1;
    return boundary == 0 ? q.nA : boundary == 1 ? q.nB : Kc;
}

struct Shared {
    u32 lut[256];
    u64 bars[WARPS][MAX_DEPTH];
    int ring_stage[WARPS][MAX_DEPTH];  // stage in each ring slot (-1: the queue ran dry)
    int next;                          // queue head
    int slot_tile[SLOTS], slot_done[SLOTS];
    int flush_slot[2];                 // boundary tile's accumulator, handed to the flush warp (-1: not yet)
};

// lane 0 of compute warp w: take the next stage from the queue into ring slot `slot` and issue its bulk copies
__device__ __forceinline__ void take_stage(const GemvArgs& p, const Plan& q, Shared& sm, unsigned char* ring, int w,
                                           int slot) {
    const int u = atomicAdd(&sm.next, 1);
    sm.ring_stage[w][slot] = u < q.total ? u : -1;
    if (u >= q.total) return;
    int tile, c, n;
    stage_of(q, p.Kc, u, tile, c, n);
    const long long f = ((long long)tile * p.Kc + c) * 32;
    unsigned char* dst = ring + slot * BULK_STAGE_BYTES;
    mbar_expect_tx(&sm.bars[w][slot], n * 576);
    bulk_load(dst, p.wq + f, n * 512, &sm.bars[w][slot]);
    bulk_load(dst + BULK_C * 512, p.wsc + f, n * 64, &sm.bars[w][slot]);
}

// interior tile complete in accumulator sl: y = acc * alpha (bf16), accumulator zeroed and released
__device__ __forceinline__ void write_tile(const GemvArgs& p, Shared& sm, float* acc, int sl, int tile) {
    const int lane = threadIdx.x & 31;
    const float al = p.alpha[tile];
    for (int e = lane; e < 16 * p.M; e += 32) {
        const int m = e >> 4, n = tile * 16 + (e & 15);
        float* a = acc + (sl * 16 + m) * 16 + (e & 15);
        if (n < p.N) p.y[(u64)m * p.N + n] = f32_to_bf16(*a * al);
        *a = 0.0f;
    }
    __syncwarp();
    if (lane == 0) {
        sm.slot_done[sl] = 0;
        __threadfence_block();
        atomicExch(&sm.slot_tile[sl], -1);
    }
}

// a compute warp's stage sums out[NT][4] (n chunks of `tile`) into the tile's shared-memory accumulator; the warp
// that completes the tile's chunks writes it (interior) or hands it to the flush warp (boundary)
template <int NT>
__device__ __forceinline__ void add_stage(const GemvArgs& p, const Plan& q, Shared& sm, float* acc, int tile, int n,
                                          const float (&out)[NT][4]) {
    const int lane = threadIdx.x & 31, sl = tile % SLOTS;
    if (lane == 0)
        while (true) {
            const int cur = atomicCAS(&sm.slot_tile[sl], -1, tile);
            if (cur == -1 || cur == tile) break;
            __nanosleep(64);
        }
    __syncwarp();
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int m = acc_m(nt, i);
            if (m < p.M) atomicAdd(acc + (sl * 16 + m) * 16 + (lane >> 2) + (i >> 1) * 8, out[nt][i]);
        }
    __syncwarp();
    int boundary, last = 0;
    const int need = chunks_of(q, p.Kc, tile, boundary);
    if (lane == 0) {
        __threadfence_block();
        last = atomicAdd(&sm.slot_done[sl], n) + n == need;
        if (last && boundary >= 0) atomicExch(&sm.flush_slot[boundary], sl);
    }
    if (__shfl_sync(0xFFFFFFFFu, last, 0) && boundary < 0) {
        __threadfence_block();
        write_tile(p, sm, acc, sl, tile);
    }
}

// the flush warp: each boundary tile's block sums into the workspace, then the counter; the warp whose chunks
// complete the tile's Kc writes y
__device__ void flush_boundaries(const GemvArgs& p, const Plan& q, Shared& sm, float* acc) {
    const int lane = threadIdx.x & 31;
    for (int k = 0; k < 2; ++k) {
        const int tile = k ? q.tB : q.tA, chunks = k ? q.nB : q.nA;
        if (!chunks) continue;
        int sl = -1;
        if (lane == 0)
            while ((sl = atomicAdd(&sm.flush_slot[k], 0)) < 0) __nanosleep(128);
        sl = __shfl_sync(0xFFFFFFFFu, sl, 0);
        __threadfence_block();
        float* ws = p.ws + (u64)tile * 256;
        for (int e = lane; e < 16 * p.M; e += 32) {
            float* a = acc + sl * 256 + e;
            atomicAdd(ws + e, *a);
            *a = 0.0f;
        }
        __syncwarp();
        u32 old = 0;
        if (lane == 0) {
            sm.slot_done[sl] = 0;
            __threadfence_block();
            atomicExch(&sm.slot_tile[sl], -1);
            asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], %2;" : "=r"(old) : "l"(p.counters + tile), "r"(chunks)
                         : "memory");
        }
        if (__shfl_sync(0xFFFFFFFFu, old, 0) + chunks != (u32)p.Kc) continue;
        __threadfence();
        const float al = p.alpha[tile];
        for (int e = lane; e < 16 * p.M; e += 32) {
            const int n = tile * 16 + (e & 15);
            const float v = __ldcg(ws + e);
            __stcg(ws + e, 0.0f);
            if (n < p.N) p.y[(u64)(e >> 4) * p.N + n] = f32_to_bf16(v * al);
        }
        if (lane == 0) p.counters[tile] = 0;
    }
}

// a compute warp: its ring's stages in the order taken, until the queue runs dry
template <int NT, bool XS>
__device__ void compute_warp(const GemvArgs& p, const Plan& q, Shared& sm, unsigned char* ring, const uint4* xs,
                             float* acc, int depth) {
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const u16* xl[NT];
    const uint4* xsl[NT];
    x_rows<NT>(p, xs, xl, xsl);
    const int kmax = p.K - 16 - 16 * (lane & 3);
    for (int s = 0;; ++s) {
        const int slot = s % depth;
        __syncwarp();
        const int u = sm.ring_stage[w][slot];
        if (u < 0) break;
        int tile, c, n;
        stage_of(q, p.Kc, u, tile, c, n);
        uint4 xg[BULK_C][NT][2];
        if (!XS) load_x<NT>(xl, kmax, c, xg);
        mbar_wait(&sm.bars[w][slot], (s / depth) & 1);
        float part[4 / NT][NT][4] = {};
        compute_stage<NT, MODE_NORMAL, XS>(ring + slot * BULK_STAGE_BYTES, c, n, p.Kc, sm.lut, xsl, xg, part);
        float out[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                float v = 0.0f;
#pragma unroll
                for (int j = 0; j < 4 / NT; ++j) v += part[j][nt][i];
                out[nt][i] = v;
            }
        __syncwarp();  // the slot's shared-memory reads are done before lane 0 refills it
        if (lane == 0) take_stage(p, q, sm, ring, w, slot);
        add_stage<NT>(p, q, sm, acc, tile, n, out);
    }
}

// dynamic shared memory: WARPS rings of `depth` stages, x staged (XS: [M, Kc * 64] bf16), SLOTS accumulators
// [16 m][16 rows] f32
template <int NT, bool XS>
__device__ void gemv_stream_body(const GemvArgs& p, int depth) {
    __shared__ Shared sm;
    extern __shared__ __align__(128) unsigned char dyn[];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    unsigned char* ring = dyn + w * depth * BULK_STAGE_BYTES;
    uint4* xs = reinterpret_cast<uint4*>(dyn + WARPS * depth * BULK_STAGE_BYTES);
    float* acc = reinterpret_cast<float*>(dyn + WARPS * depth * BULK_STAGE_BYTES + (XS ? p.M * p.Kc * 128 : 0));
    const int total = (p.Np / 16) * p.Kc;
    const Plan q = make_plan((int)((long long)total * blockIdx.x / gridDim.x),
                             (int)((long long)total * (blockIdx.x + 1) / gridDim.x), p.Kc);
    if (XS) stage_x(p, xs);  // first, so x is not queued behind the weight copies
    for (int i = threadIdx.x; i < 256; i += blockDim.x) sm.lut[i] = e4m3_scaled_bf16x2(i);
    for (int i = threadIdx.x; i < SLOTS * 256; i += blockDim.x) acc[i] = 0.0f;
    if (threadIdx.x < SLOTS) sm.slot_tile[threadIdx.x] = -1, sm.slot_done[threadIdx.x] = 0;
    if (threadIdx.x < 2) sm.flush_slot[threadIdx.x] = -1;
    if (threadIdx.x == 0) sm.next = 0;
    if (w < WARPS && lane == 0) {
        for (int s = 0; s < depth; ++s) mbar_init(&sm.bars[w][s]);
        fence_mbarrier_init();
    }
    __syncthreads();
    if (w < WARPS && lane == 0)
        for (int s = 0; s < depth; ++s) take_stage(p, q, sm, ring, w, s);
    if (XS) cp_async_wait_all();
    __syncthreads();
    if (w < WARPS)
        compute_warp<NT, XS>(p, q, sm, ring, xs, acc, depth);
    else
        flush_boundaries(p, q, sm, acc);
}

#define GEMV_STREAM_KERNEL(name, NT, XS)                                                                       \
    extern "C" __global__ void __launch_bounds__((WARPS + 1) * 32, 1)                                          \
    name(const uint4* wq, const u16* wsc, const u16* x, u16* y, float* ws, int* counters, const float* alpha, \
         int M, int N, int K, int Np, int Kc, int depth) {                                                     \
        gemv_stream_body<NT, XS>(GemvArgs{wq, wsc, x, y, ws, counters, alpha, M, N, K, Np, Kc}, depth);       \
    }
GEMV_STREAM_KERNEL(nvfp4_gemv_stream_nt1, 1, false)
GEMV_STREAM_KERNEL(nvfp4_gemv_stream_nt2, 2, false)
GEMV_STREAM_KERNEL(nvfp4_gemv_stream_xs_nt1, 1, true)
