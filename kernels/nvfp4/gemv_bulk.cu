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
// writes y; partial row groups meet by the slot protocol (contributors store, the block holding chunk 0 finishes:
// finish_row_group), with no atomics or fences; ws is the slot array, `counters` is unused.
// x: XS = staged once per block in shared memory (M * Kc * 128 B, cp.async), else read per stage from global
// through L1 (ld.global.nc) before the stage's wait, so its latency overlaps the weight copy.
// Bench diagnostics (wrong results): MODE_LOADONLY the same copies, no decode or MMA; MODE_NOFLUSH no split-K flush;
// MODE_NOMMA (gemv_stage.cuh) decode without the MMA.
// MODE_TRACE (bench diagnostic, results right): lane 0 of every warp records %globaltimer and clock64 into bulk_trace:
// [block][warp][64]: 0 start, 1 + 2s / 2 + 2s stage s's data there / computed (s < 31), 63 end.
#define MODE_TRACE 6
// MODE_TRACE_NF: MODE_TRACE without the partial row groups
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

// Partial row groups, without atomics or fences (slot protocol): a row group split over virtual blocks b_f < b_f + 1
// < ... <= b_l (block = 8 warps, warp w = tile rg * 8 + w) is finished by b_f, the block holding its chunk 0 (for
// b_f that is its last segment, or its only one: done at the end of the block's work). Every other block b
// contributes its first segment (where its range starts inside the row group) by storing its sums into its own
// slot, ws [nvb][8 warps][NT][32 lanes] float4, kept at SLOT_SENTINEL (a NaN no arithmetic produces) between calls.
// At the end of its work the finisher polls the slots of b_f + 1 .. b_l until none reads the sentinel, adds them to
// its own sums in block order (deterministic), writes y and puts the sentinel back. One L2 round trip after the last
// contribution, where v7's flush takes three (reduction, fenced counter atomic, read-back). The finisher waits on
// other CTAs: the grid must be resident at once (one or two CTAs per SM, the GPU to ourselves, as stream-K).
#define SLOT_SENTINEL 0x7FBADBADu

__device__ __forceinline__ float4* slot_of(const GemvArgs& p, int vb, int nt, int NT) {
    return reinterpret_cast<float4*>(p.ws) + (((long long)vb * 8 + ((threadIdx.x >> 5) & 7)) * NT + nt) * 32 +
           (threadIdx.x & 31);
}

// the virtual block whose range holds item i (ranges [total b / nvb, total (b + 1) / nvb))
__device__ __forceinline__ int vb_of(long long i, int nvb, int total) {
    return (int)(((i + 1) * nvb - 1) / total);
}

template <int NT>
__device__ __forceinline__ void contribute(const GemvArgs& p, int vb, const float (&out)[NT][4]) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        float4* s = slot_of(p, vb, nt, NT);
        asm volatile("st.relaxed.gpu.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(s), "f"(out[nt][0]), "f"(out[nt][1]),
                     "f"(out[nt][2]), "f"(out[nt][3]) : "memory");
    }
}

// the finisher's end: its own sums fin plus every contributor's slot (polled), written to y
template <int NT>
__device__ void finish_row_group(const GemvArgs& p, int vb, int nvb, int total, int rg, float (&fin)[NT][4]) {
    const int last = vb_of((long long)(rg + 1) * p.Kc - 1, nvb, total);
    for (int b = vb + 1; b <= last; ++b) {
        if ((long long)total * (b + 1) / nvb <= (long long)total * b / nvb) continue;  // an empty range: no slot
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            float4* s = slot_of(p, b, nt, NT);
            u32 v[4];
            do {
                asm volatile("ld.relaxed.gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "l"(s) : "memory");
            } while (v[0] == SLOT_SENTINEL || v[1] == SLOT_SENTINEL || v[2] == SLOT_SENTINEL || v[3] == SLOT_SENTINEL);
            asm volatile("st.relaxed.gpu.global.v4.u32 [%0], {%1, %1, %1, %1};" ::"l"(s), "r"(SLOT_SENTINEL) : "memory");
#pragma unroll
            for (int i = 0; i < 4; ++i) fin[nt][i] += __uint_as_float(v[i]);
        }
    }
    store_y<NT>(YOut{p.y, p.alpha, p.M, p.N}, rg * 8 + ((threadIdx.x >> 5) & 7), fin);
}

// end of a row-group segment (chunks [c0, c0 + chunks) of rg): a whole row group writes y; a segment holding chunk 0
// becomes the finisher's sums (fin, has_fin), done at the end; any other is this block's contribution
template <int NT, int MODE>
__device__ __forceinline__ void finish_segment(const GemvArgs& p, int vb, int rg, int c0, int chunks,
                                               float (&acc)[4 / NT][NT][4], float (&fin)[NT][4], int& fin_rg) {
    float out[NT][4];
    sum_sets<NT, 4 / NT>(acc, out);
    const int tile = rg * 8 + ((threadIdx.x >> 5) & 7);
    if (chunks == p.Kc)
        store_y<NT>(YOut{p.y, p.alpha, p.M, p.N}, tile, out);
    else if (MODE == MODE_NOFLUSH || MODE == MODE_TRACE_NF || MODE == MODE_TRACE_LO || MODE == MODE_LOADONLY)
        return;
    else if (c0 == 0) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) fin[nt][i] = out[nt][i];
        fin_rg = rg;
    } else
        contribute<NT>(p, vb, out);
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
    float acc[4 / NT][NT][4] = {}, fin[NT][4];
    int cur = -1, seg = 0, c0 = 0, rg, c, n, fin_rg = -1;
    trace_at(MODE, 0);
    for (int s = 0; take.next(rg, c, n); ++s) {
        if (rg != cur) {
            if (cur >= 0) finish_segment<NT, MODE>(p, vb, cur, c0, seg, acc, fin, fin_rg);
            cur = rg, seg = 0, c0 = c;
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
    if (cur >= 0) finish_segment<NT, MODE>(p, vb, cur, c0, seg, acc, fin, fin_rg);
    if (fin_rg >= 0) finish_row_group<NT>(p, vb, nvb, total, fin_rg, fin);
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
GEMV_BULK_KERNEL(nvfp4_gemv_bulk_xs_nt1_noflush_trace, 1, MODE_TRACE_NF, true)
GEMV_BULK_KERNEL(nvfp4_gemv_bulk_xs_nt1_loadonly_trace, 1, MODE_TRACE_LO, true)
GEMV_BULK_KERNEL_W16(nvfp4_gemv_bulk_xs_nt1_w16, 1, MODE_NORMAL, true)
GEMV_BULK_KERNEL_W16(nvfp4_gemv_bulk_nt1_w16, 1, MODE_NORMAL, false)
GEMV_BULK_KERNEL_W16(nvfp4_gemv_bulk_nt2_w16, 2, MODE_NORMAL, false)
GEMV_BULK_KERNEL_W16(nvfp4_gemv_bulk_xs_nt1_noflush_w16, 1, MODE_NOFLUSH, true)
GEMV_BULK_KERNEL_W16(nvfp4_gemv_bulk_xs_nt1_trace_w16, 1, MODE_TRACE, true)
GEMV_BULK_KERNEL_W16(nvfp4_gemv_bulk_xs_nt1_noflush_trace_w16, 1, MODE_TRACE_NF, true)
