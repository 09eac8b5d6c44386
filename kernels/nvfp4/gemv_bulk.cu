// gemv_bulk.cu (v8): NVFP4 weight x bf16 activations for M = 1..16 rows (decode), y[M, N] = x[M, K] W^T, with the
// weight stream fed by the Tensor Memory Accelerator: bytes in flight live in shared memory, not in registers.
// Not dispatched (slower than ops.gemv's pick on every shape, NOTES.md session 5): kept for its diagnostics, the
// loads-only stream (74-75% of copy bandwidth on 50 MB, 103% on the LM head) and the per-warp timeline (MODE_TRACE).
//
// Work split as gemv.cu (v7): items (row group rg = 128 rows, k chunk c = 64 k), rg-major, split evenly over a
// persistent grid of 2 blocks per SM; warp w of a block takes tile rg * 8 + w of every item, so a warp's chunks of
// one row group are contiguous in the repacked layout (wq [Np/16, Kc, 32 lanes, 16 B], wsc [Np/16, Kc, 32, 2 B]).
// Each warp owns a ring of `depth` stages in dynamic shared memory; a stage holds up to C chunks of one row group:
// C x 512 B of fragments, then C x 64 B of scale pairs, loaded by two cp.async.bulk copies (issued by lane 0) that
// complete on the stage's mbarrier (transaction bytes). A warp waits for its stage, reads each lane's 16-byte
// fragment and scale pair from shared memory (conflict-free: lanes read consecutive words), decodes and multiplies
// as gemv_core.cuh does, then lane 0 refills the stage `depth` stages ahead. A block that covers a whole row group
// writes y; partial segments go through v7's workspace, flushed per warp without a block barrier and settled at the
// end of the block's work (flush_issue / flush_settle; counters per 16-row tile, [Np/16] int32, zero between calls).
// x: XS = staged once per block in shared memory (M * Kc * 128 B, cp.async), else read per stage from global
// through L1 (ld.global.nc) before the stage's wait, so its latency overlaps the weight copy.
// Bench diagnostics (wrong results): MODE_LOADONLY the same copies, no decode or MMA; MODE_NOFLUSH no split-K flush;
// MODE_NOMMA (gemv_stage.cuh) decode without the MMA.
// MODE_TRACE (bench diagnostic, results right): lane 0 of every warp records %globaltimer and clock64 into bulk_trace:
// [block][warp][64]: 0 start, 1 + 2s / 2 + 2s stage s's data there / computed (s < 31), 63 end.
#define MODE_TRACE 6
// MODE_NOSETTLE: partial sums reduced, counters never bumped (y incomplete); MODE_TRACE_NF: MODE_TRACE without flush
#define MODE_NOSETTLE 7
#define MODE_TRACE_NF 8
#define MODE_TRACE_LO 9  // MODE_LOADONLY traced
#define TRACE_BLOCKS 528
__device__ unsigned long long bulk_trace[TRACE_BLOCKS * 8 * 64][2];
__device__ __forceinline__ void trace_at(int mode, int e) {
    if ((mode != MODE_TRACE && mode != MODE_TRACE_NF && mode != MODE_TRACE_LO) || (threadIdx.x & 31) ||
        blockIdx.x * (blockDim.x >> 8) >= TRACE_BLOCKS)
        return;
    unsigned long long t, c;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    c = clock64();
    const int vb = blockIdx.x * (blockDim.x >> 8) + (threadIdx.x >> 8);  // virtual block (8 warps)
    unsigned long long* r = bulk_trace[(vb * 8 + ((threadIdx.x >> 5) & 7)) * 64 + e];
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    r[0] = t, r[1] = e == 0 ? sm : c;  // entry 0 keeps the SM id instead of the clock
}
#include "gemv_core.cuh"
#include "gemv_split.cuh"  // red_add_v4
#include "bulk_ptx.cuh"
#include "gemv_stage.cuh"

#define BULK_MAX_DEPTH 8

// the next stage of a warp's stream: chunks [c, c + n) of row group rg, n <= BULK_C, within one row group and the
// block's item range [i, end). Returns false past the end.
struct Cursor {
    int i, end, Kc, rg, c;  // rg, c: row group and chunk of item i
    __device__ __forceinline__ Cursor(int i0, int end_, int Kc_) : i(i0), end(end_), Kc(Kc_), rg(i0 / Kc_), c(i0 % Kc_) {}
    __device__ __forceinline__ bool next(int& rg_out, int& c_out, int& n) {
        if (i >= end) return false;
        rg_out = rg, c_out = c;
        n = min(min(BULK_C, Kc - c), end - i);
        i += n, c += n;
        if (c == Kc) ++rg, c = 0;
        return true;
    }
};

// lane 0: stage `slot` <- chunks [c, c + n) of tile rg * 8 + warp
__device__ __forceinline__ void issue_stage(const GemvArgs& p, unsigned char* slot, u64* bar, int rg, int c, int n) {
    const long long f = ((long long)(rg * 8 + ((threadIdx.x >> 5) & 7)) * p.Kc + c) * 32;
    mbar_expect_tx(bar, n * 576);
    bulk_load(slot, p.wq + f, n * 512, bar);
    bulk_load(slot + BULK_C * 512, p.wsc + f, n * 64, bar);
}

// A partial row-group segment's flush, per warp and deferred (no block barrier, no fence in the main loop): each lane
// adds its sums into the workspace (ws [Np/16 tiles, NT, 32 lanes] float4, one vector reduction each) at once; the
// tile's counter is bumped only when the warp's work is done (flush_settle), when no bulk copy of the warp is in
// flight any more for a fence to wait on: __syncwarp, then lane 0's acq_rel atomic (release: cumulative over the
// warp's reductions; acquire: for the read-back). The warp whose chunks complete the tile's Kc reads the sums back
// (ld.cg), re-zeroes them, scales and writes y, and resets the counter.
struct Pending {
    int tile, chunks;
};

__device__ __forceinline__ u32 atom_add_acq_rel(int* p, int v) {
    u32 old;
    asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

template <int NT>
__device__ __forceinline__ void flush_issue(const GemvArgs& p, int tile, const float (&out)[NT][4]) {
    float4* ws = (float4*)p.ws + (u64)tile * NT * 32 + (threadIdx.x & 31);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
        if (acc_m(nt, 0) < p.M) red_add_v4(ws + nt * 32, out[nt]);
}

template <int NT>
__device__ __forceinline__ void flush_settle(const GemvArgs& p, const Pending (&pend)[2], int np) {
    const int lane = threadIdx.x & 31;
    __syncwarp();
    u32 old[2] = {0u, 0u};
#pragma unroll
    for (int i = 0; i < 2; ++i)
        if (lane == 0 && i < np) old[i] = atom_add_acq_rel(p.counters + pend[i].tile, pend[i].chunks);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        if (i >= np || __shfl_sync(0xFFFFFFFFu, old[i], 0) + pend[i].chunks != (u32)p.Kc) continue;
        __threadfence();
        float4* ws = (float4*)p.ws + (u64)pend[i].tile * NT * 32 + lane;
        float acc[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (acc_m(nt, 0) < p.M) {
                v = __ldcg(ws + nt * 32);
                __stcg(ws + nt * 32, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
            }
            acc[nt][0] = v.x, acc[nt][1] = v.y, acc[nt][2] = v.z, acc[nt][3] = v.w;
        }
        store_y<NT>(YOut{p.y, p.alpha, p.M, p.N}, pend[i].tile, acc);
        if (lane == 0) p.counters[pend[i].tile] = 0;
    }
}

// end of a row-group segment of `chunks` chunks: y directly if it is the whole row group, else the deferred flush
// (its Pending appended to pend[np++]; at most 2 per warp: the block's first and last segments)
template <int NT, int MODE>
__device__ __forceinline__ void finish_segment(const GemvArgs& p, int rg, int chunks, float (&acc)[4 / NT][NT][4],
                                               Pending (&pend)[2], int& np) {
    float out[NT][4];
    sum_sets<NT, 4 / NT>(acc, out);
    const int tile = rg * 8 + ((threadIdx.x >> 5) & 7);
    if (chunks == p.Kc)
        store_y<NT>(YOut{p.y, p.alpha, p.M, p.N}, tile, out);
    else if (MODE == MODE_NORMAL || MODE == MODE_TRACE || MODE == MODE_NOSETTLE) {
        flush_issue<NT>(p, tile, out);
        pend[1] = Pending{tile, chunks};  // the block's last segment (or its only one)
        if (np == 0) pend[0] = pend[1];
        ++np;
    }
}

template <int NT, int MODE, bool XS>
__device__ void gemv_bulk_body(const GemvArgs& p, int depth) {
    __shared__ u32 lut[256];
    __shared__ __align__(8) u64 bars[16][BULK_MAX_DEPTH];
    extern __shared__ __align__(128) unsigned char dyn[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    unsigned char* ring = dyn + warp * depth * BULK_STAGE_BYTES;
    const uint4* xs = reinterpret_cast<const uint4*>(dyn + (blockDim.x >> 5) * depth * BULK_STAGE_BYTES);
    const int total = (p.Np / 128) * p.Kc;
    // 256 threads: one block of 8 warps; 512: two virtual blocks of 8 warps in one CTA (warps 8-15 the second), whose
    // warps the scheduler treats alike (two CTAs on one SM finish ~4 us apart, NOTES.md session 5)
    const int nvb = gridDim.x * (blockDim.x >> 8), vb = blockIdx.x * (blockDim.x >> 8) + (threadIdx.x >> 8);
    Cursor fill((int)((long long)total * vb / nvb), (int)((long long)total * (vb + 1) / nvb), p.Kc);
    Cursor take = fill;
    lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    if (XS) stage_x(p, const_cast<uint4*>(xs));  // before the weight copies, so x is not queued behind them
    if (lane == 0) {
        for (int s = 0; s < depth; ++s) mbar_init(&bars[warp][s]);
        fence_mbarrier_init();
        int rg, c, n;
        for (int s = 0; s < depth && fill.next(rg, c, n); ++s) issue_stage(p, ring + s * BULK_STAGE_BYTES, &bars[warp][s], rg, c, n);
    }
    if (XS) cp_async_wait_all();
    __syncthreads();
    const u16* xl[NT];
    const uint4* xsl[NT];
    x_rows<NT>(p, xs, xl, xsl);
    const int kmax = p.K - 16 - 16 * (lane & 3);
    float acc[4 / NT][NT][4] = {};
    int cur = -1, seg = 0, rg, c, n, np = 0;
    Pending pend[2];
    trace_at(MODE, 0);
    for (int s = 0; take.next(rg, c, n); ++s) {
        if (rg != cur) {
            if (cur >= 0) finish_segment<NT, MODE>(p, cur, seg, acc, pend, np);
            cur = rg, seg = 0;
        }
        uint4 xg[BULK_C][NT][2];
        if (!XS && MODE != MODE_LOADONLY) load_x<NT>(xl, kmax, c, xg);
        const int slot = s % depth;
        unsigned char* st = ring + slot * BULK_STAGE_BYTES;
        mbar_wait(&bars[warp][slot], (s / depth) & 1);
        if (s < 31) trace_at(MODE, 1 + 2 * s);
        compute_stage<NT, MODE == MODE_TRACE_LO ? MODE_LOADONLY : MODE >= MODE_TRACE ? MODE_NORMAL : MODE, XS>(st, c, n, p.Kc, lut, xsl, xg, acc);
        if (s < 31) trace_at(MODE, 2 + 2 * s);
        seg += n;
        __syncwarp();
        int frg, fc, fn;
        if (lane == 0 && fill.next(frg, fc, fn)) issue_stage(p, st, &bars[warp][slot], frg, fc, fn);
    }
    if (cur >= 0) finish_segment<NT, MODE>(p, cur, seg, acc, pend, np);
    if (np > 0 && MODE != MODE_NOSETTLE) flush_settle<NT>(p, pend, np);
    trace_at(MODE, 63);
}

#define GEMV_BULK_PARAMS const uint4* wq, const u16* wsc, const u16* x, u16* y, float* ws, int* counters, \
                         const float* alpha, int M, int N, int K, int Np, int Kc, int depth
#define GEMV_BULK_KERNEL_T(name, NT, MODE, XS, THREADS, BLOCKS)                             \
    extern "C" __global__ void __launch_bounds__(THREADS, BLOCKS) name(GEMV_BULK_PARAMS) {  \
        gemv_bulk_body<NT, MODE, XS>(GemvArgs{wq, wsc, x, y, ws, counters, alpha, M, N, K, Np, Kc}, depth); \
    }
#define GEMV_BULK_KERNEL_B(name, NT, MODE, XS, BLOCKS) GEMV_BULK_KERNEL_T(name, NT, MODE, XS, 256, BLOCKS)
#define GEMV_BULK_KERNEL(name, NT, MODE, XS) GEMV_BULK_KERNEL_B(name, NT, MODE, XS, 2)
// 16 warps, one CTA per SM (_w16)
#define GEMV_BULK_KERNEL_W16(name, NT, MODE, XS) GEMV_BULK_KERNEL_T(name, NT, MODE, XS, 512, 1)
GEMV_BULK_KERNEL(nvfp4_gemv_bulk_nt1, 1, MODE_NORMAL, false)
GEMV_BULK_KERNEL(nvfp4_gemv_bulk_nt2, 2, MODE_NORMAL, false)
GEMV_BULK_KERNEL(nvfp4_gemv_bulk_xs_nt1, 1, MODE_NORMAL, true)
GEMV_BULK_KERNEL(nvfp4_gemv_bulk_nt1_loadonly, 1, MODE_LOADONLY, false)
GEMV_BULK_KERNEL(nvfp4_gemv_bulk_xs_nt1_noflush, 1, MODE_NOFLUSH, true)
GEMV_BULK_KERNEL(nvfp4_gemv_bulk_xs_nt1_nomma, 1, MODE_NOMMA, true)
GEMV_BULK_KERNEL_B(nvfp4_gemv_bulk_xs_nt1_b3, 1, MODE_NORMAL, true, 3)
GEMV_BULK_KERNEL(nvfp4_gemv_bulk_xs_nt1_trace, 1, MODE_TRACE, true)
GEMV_BULK_KERNEL(nvfp4_gemv_bulk_nt1_trace, 1, MODE_TRACE, false)
GEMV_BULK_KERNEL(nvfp4_gemv_bulk_xs_nt1_noflush_trace, 1, MODE_TRACE_NF, true)
GEMV_BULK_KERNEL(nvfp4_gemv_bulk_xs_nt1_nosettle, 1, MODE_NOSETTLE, true)
GEMV_BULK_KERNEL(nvfp4_gemv_bulk_xs_nt1_loadonly_trace, 1, MODE_TRACE_LO, true)
GEMV_BULK_KERNEL_W16(nvfp4_gemv_bulk_xs_nt1_w16, 1, MODE_NORMAL, true)
GEMV_BULK_KERNEL_W16(nvfp4_gemv_bulk_nt1_w16, 1, MODE_NORMAL, false)
GEMV_BULK_KERNEL_W16(nvfp4_gemv_bulk_nt2_w16, 2, MODE_NORMAL, false)
GEMV_BULK_KERNEL_W16(nvfp4_gemv_bulk_xs_nt1_noflush_w16, 1, MODE_NOFLUSH, true)
GEMV_BULK_KERNEL_W16(nvfp4_gemv_bulk_xs_nt1_trace_w16, 1, MODE_TRACE, true)
GEMV_BULK_KERNEL_W16(nvfp4_gemv_bulk_xs_nt1_noflush_trace_w16, 1, MODE_TRACE_NF, true)
