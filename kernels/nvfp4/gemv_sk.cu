// NVFP4 GEMV v13 (several rows): y[M, N] = x[M, K] W^T for M = 2..32, f32 sums, bf16 out, one 512-thread block a SM.
// Every warp streams its 16-row tile's fragments global -> registers U chunks ahead (ld.global.nc, gemv.cu's layout:
// one 16-byte fragment a lane a 64-k chunk; the first U loads go out before griddepcontrol.wait), decodes them with
// the e4m3 block scales (decode_word) and runs mma.sync m16n8k16 against x: staged once per block in shared memory
// (rows of Kc * 64 bf16 plus a pad that puts the lanes' reads of one row group on distinct banks) or, for the _xg
// kernels, read where it is (global memory through L1: no staging before the first MMA).
// Two work splits (gemv_sk.py picks by rows and weight size):
// - nvfp4_gemv_sk_nt2 / _nt2_xg (9-16 rows), _nt3_xg (17-24), stream-K quads: the weight's quads (4 consecutive tiles,
//   64 rows) x Kc chunks as one list split evenly over every warpgroup of the grid: warpgroup g of G takes
//   [total g / G, total (g + 1) / G), a run of segments (quad, chunks [ca, cb)), its warp w tile 4 quad + w of each.
//   A segment over the whole K stores its tile; a partial one adds its sums into the workspace (red.global.add, ws
//   [Np / 64 quads, 128 threads, NT * 4] f32, zero between calls) and counts its chunks on the quad's counter; the
//   warpgroup that completes Kc reads the sums back, stores the tile and re-zeroes both (gemv.cu's v7 flush, per quad).
// - nvfp4_gemv_sk_own_nt1 (2-8 rows, x staged), _own_nt1_xg / _own_nt2_xg / _own_nt3_xg / _own_nt4_xg (2-8 /
//   9-16 / 17-24 / 25-32 rows, x through L1; _nt2 and _nt3 with two sums a warp, SPLIT), block-owned tiles: block b
//   of G owns tiles [T b / G, T (b + 1) / G) (gemv_bt.cu's split), its tile-chunks split evenly over its 16 warps;
//   partial tiles meet in shared memory (no workspace, no flush).
// Session 19 (NOTES.md) against the previous pick, e.g. 17408x5120 M = 16 24.1 against v12m's 28.8 us, M = 17 29.3
// against the wgmma GEMM's 35.9, 14336x5120 M = 2 16.9 against 19.5. Needs K % 8 == 0, K >= 16 and, staged, x in
// shared memory (gemv_sk.py checks); a warp or warpgroup with no chunks (more warps than work) stops.
#include "gemv_sk_core.cuh"

// a partial segment of quad q (n chunks): add into the workspace; after the warpgroup's barrier thread 0 fences and
// counts (CUTLASS's GenericBarrier::arrive_inc: one fence, not one a thread; 0.1-0.3 us faster, session 19 run 3);
// the warpgroup completing Kc stores the tile
template <int NT>
__device__ __forceinline__ void sk_flush(const SkArgs& p, int q, int n, float (&acc)[NT][4], int* last) {
    const int wg = threadIdx.x >> 7, t = threadIdx.x & 127;
    float* w = p.ws + ((u64)q * 128 + t) * (NT * 4);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
        asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(w + 4 * nt), "f"(acc[nt][0]),
                     "f"(acc[nt][1]), "f"(acc[nt][2]), "f"(acc[nt][3]) : "memory");
    asm volatile("bar.sync %0, 128;" :: "r"(1 + wg) : "memory");
    if (t == 0) {
        asm volatile("fence.acq_rel.gpu;" ::: "memory");
        last[wg] = atomicAdd(p.counters + q, n) + n == p.Kc;
    }
    asm volatile("bar.sync %0, 128;" :: "r"(1 + wg) : "memory");
    if (!last[wg]) return;
    __threadfence();
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        const float4 v = __ldcg((const float4*)(w + 4 * nt));
        acc[nt][0] = v.x, acc[nt][1] = v.y, acc[nt][2] = v.z, acc[nt][3] = v.w;
        __stcg((float4*)(w + 4 * nt), make_float4(0.0f, 0.0f, 0.0f, 0.0f));
    }
    if (t == 0) p.counters[q] = 0;
    store_y<NT>(YOut{p.y, p.alpha, p.M, p.N}, 4 * q + (t >> 5), acc);
}

// stream-K quads; XG: x read from global memory (through L1), else staged with 16-byte pads and read up front
template <int NT, int U, bool XG>
__device__ void sk_body(const SkArgs& p) {
    constexpr int PAD = 16;
    __shared__ u32 lut[256];
    __shared__ int last[SK_THREADS / 128];
    extern __shared__ __align__(16) unsigned char xs[];
    pdl_launch_dependents();
    const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3;
    const long long G = (long long)gridDim.x * (SK_THREADS / 128), g = (long long)blockIdx.x * (SK_THREADS / 128) + wg;
    const long long total = (long long)(p.Np / 64) * p.Kc;
    long long a = total * g / G;
    const long long b = total * (g + 1) / G;
    SkRing<U> r;
    int q = (int)(a / p.Kc), ca = (int)(a % p.Kc), cb = (int)min((long long)p.Kc, ca + (b - a));
    sk_load<U>(p, 4 * q + warp, ca, cb, r);  // the first loads need nothing from the kernel before
    if (threadIdx.x < 256) lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    pdl_wait();
    const unsigned char* xr[NT];
    sk_x_ready<NT, PAD, XG>(p, xs, xr);
    while (a < b) {
        float acc[NT][4];
        sk_segment<NT, U, false, XG>(p, 4 * q + warp, ca, cb, lut, xr, r, acc);
        a += cb - ca;
        const int q0 = q, n = cb - ca;
        if (a < b) {  // the next segment's first loads before this one's store or flush
            q = (int)(a / p.Kc), ca = 0, cb = (int)min((long long)p.Kc, b - a);
            sk_load<U>(p, 4 * q + warp, ca, cb, r);
        }
        if (n == p.Kc) store_y<NT>(YOut{p.y, p.alpha, p.M, p.N}, 4 * q0 + warp, acc);
        else sk_flush<NT>(p, q0, n, acc, last);
    }
}

// after the block's barrier: each warp settles the tiles whose first partial slot is one of its two (2 w, 2 w + 1),
// adding the tile's later slots (a tile's slots are consecutive among the used ones) and storing it
template <int NT, int W>
__device__ __forceinline__ void own_settle(const SkArgs& p, const float (&slots)[2 * W][32][NT * 4],
                                           const int (&slot_tile)[2 * W]) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int s = 2 * warp; s < 2 * warp + 2; ++s) {
        const int tile = slot_tile[s];
        int prev = s - 1;
        while (prev >= 0 && slot_tile[prev] < 0) --prev;
        if (tile < 0 || (prev >= 0 && slot_tile[prev] == tile)) continue;  // not the tile's first slot
        float acc[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[nt][e] = slots[s][lane][4 * nt + e];
        for (int o = s + 1; o < 2 * W; ++o) {
            if (slot_tile[o] < 0) continue;
            if (slot_tile[o] != tile) break;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[nt][e] += slots[o][lane][4 * nt + e];
        }
        store_y<NT>(YOut{p.y, p.alpha, p.M, p.N}, tile, acc);
    }
}

// block-owned tiles: block b of G owns tiles [T b / G, T (b + 1) / G) (gemv_bt.cu's split), its tile-chunks split
// evenly over its 16 warps; a warp's partial first / last segment goes to its slot 2 w / 2 w + 1 and after one
// barrier the warp holding a tile's first slot adds the tile's slots (consecutive: the warps' ranges are in order);
// x staged with 8-byte pads, each k-step's words read just before its MMA; XG: x read from global memory (through
// L1, each chunk's words up front), not staged
template <int NT, int U, bool XG = false, bool SPLIT = false>
__device__ void own_body(const SkArgs& p) {
    constexpr int PAD = 8, W = SK_THREADS / 32;
    constexpr bool DYN = NT > 2;  // the slots (48 / 64 KB at NT = 3 / 4) in the dynamic shared memory (x unstaged)
    static_assert(!DYN || XG, "slots in dynamic shared memory need x read through L1");
    __shared__ u32 lut[256];
    __shared__ float slots_static[DYN ? 1 : 2 * W][32][NT * 4];
    __shared__ int slot_tile[2 * W];
    extern __shared__ __align__(16) unsigned char xs[];
    auto& slots = *reinterpret_cast<float(*)[2 * W][32][NT * 4]>(DYN ? (void*)xs : (void*)slots_static);
    pdl_launch_dependents();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int T = p.Np / 16, t0 = (int)((long long)T * blockIdx.x / gridDim.x);
    const int tiles = (int)((long long)T * (blockIdx.x + 1) / gridDim.x) - t0;
    int i = (int)((long long)tiles * p.Kc * warp / W);
    const int end = (int)((long long)tiles * p.Kc * (warp + 1) / W);
    SkRing<U> r;
    int lt = i / p.Kc, ca = i - lt * p.Kc, cb = min(p.Kc, ca + (end - i));
    sk_load<U>(p, t0 + lt, ca, cb, r);
    if (threadIdx.x < 256) lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    if (lane < 2) slot_tile[2 * warp + lane] = -1;
    pdl_wait();
    const unsigned char* xr[NT];
    sk_x_ready<NT, PAD, XG>(p, xs, xr);
    bool first = true;
    while (i < end) {
        float acc[NT][4];
        sk_segment<NT, U, !XG, XG, SPLIT>(p, t0 + lt, ca, cb, lut, xr, r, acc);
        i += cb - ca;
        const int l0 = lt, n = cb - ca;
        if (i < end) {
            lt = i / p.Kc, ca = 0, cb = min(p.Kc, end - i);
            sk_load<U>(p, t0 + lt, ca, cb, r);
        }
        if (n == p.Kc) {
            store_y<NT>(YOut{p.y, p.alpha, p.M, p.N}, t0 + l0, acc);
        } else {
            const int s = 2 * warp + (first ? 0 : 1);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) slots[s][lane][4 * nt + e] = acc[nt][e];
            if (lane == 0) slot_tile[s] = t0 + l0;
        }
        first = false;
    }
    __syncthreads();
    own_settle<NT, W>(p, slots, slot_tile);
}

#define SK_PARAMS const uint4* wq, const u16* wsc, const u16* x, u16* y, float* ws, int* counters, const float* alpha, \
                  int M, int N, int K, int Np, int Kc
#define SK_ARGS SkArgs{wq, wsc, x, y, ws, counters, alpha, M, N, K, Np, Kc}
// session 19 runs 4 and 8 (gemv_sk.py): stream-K quads for 9-24 rows (x staged and read up front, 4 chunks in flight,
// or read from L1, 4 chunks at 9-16 rows / 3 at 17-24), block-owned tiles for 2-8 rows (2 chunks, x just in time).
// Session 22 (device runs 2-3): block-owned tiles with x read through L1 (_own_nt1_xg, _own_nt2_xg: 2 chunks in
// flight; 1 or 3 lose, e.g. 6144x5120 M = 16 14.2 / 11.1 / 12.3 us at 1 / 2 / 3) on 2.4-7 tiles a block at K <= 6144.
// 17-24 rows: 3 chunks (128 registers, no spills) 1-7% faster than 2 (session 20 device run 3, e.g. 17408x5120
// M = 17 28.4 against 29.7 us); 2 tiles a warp sharing each chunk's x words lost (run 1: 17408x5120 32.5), as did x
// read a k-step at a time (4-5 chunks: 38.2-40.3)
extern "C" __global__ void __launch_bounds__(SK_THREADS, 1) nvfp4_gemv_sk_nt2(SK_PARAMS) {
    sk_body<2, 4, false>(SK_ARGS);
}
extern "C" __global__ void __launch_bounds__(SK_THREADS, 1) nvfp4_gemv_sk_nt2_xg(SK_PARAMS) {
    sk_body<2, 4, true>(SK_ARGS);
}
extern "C" __global__ void __launch_bounds__(SK_THREADS, 1) nvfp4_gemv_sk_nt3_xg(SK_PARAMS) {
    sk_body<3, 3, true>(SK_ARGS);
}
extern "C" __global__ void __launch_bounds__(SK_THREADS, 1) nvfp4_gemv_sk_own_nt1(SK_PARAMS) {
    own_body<1, 2>(SK_ARGS);
}
extern "C" __global__ void __launch_bounds__(SK_THREADS, 1) nvfp4_gemv_sk_own_nt1_xg(SK_PARAMS) {
    own_body<1, 2, true>(SK_ARGS);
}
// Session 25 (device run 3): _own_nt2_xg with 4 chunks in flight and the odd ring slots' sums kept apart (two
// mma.sync chains a warp; SPLIT) 2-7% faster than 2 chunks, one chain at 9-16 rows (M = 16, us: 14336x5120 19.7 /
// 18.8, 17408x5120 23.9 / 22.2); SPLIT lost on the stream-K entries (17408x5120 M = 16 nt2_xg 23.4 / 28.2, nt3_xg
// M = 17 28.0 / 28.8), on 2-8 rows (6144x5120 M = 8 own_nt1_xg 9.9 / 10.6) and with 6 chunks (6144x5120 11.7)
extern "C" __global__ void __launch_bounds__(SK_THREADS, 1) nvfp4_gemv_sk_own_nt2_xg(SK_PARAMS) {
    own_body<2, 4, true, true>(SK_ARGS);
}
// Session 25 (device run 5): 17-24 rows on block-owned tiles (the slots in dynamic shared memory), 3 chunks in flight,
// two sums a warp, against the stream-K _nt3_xg, M = 17 us: 6144x5120 14.3 / 12.2, 10240x5120 18.9 / 16.7,
// 16384x5120 26.6 / 23.8, 17408x5120 27.9 / 25.8, 34816x5120 49.3 / 44.6; 4 chunks lost (17408x5120 31.3), one sum
// ties (25.7); K = 17408 loses (5120x17408 26.9 / 29.2)
extern "C" __global__ void __launch_bounds__(SK_THREADS, 1) nvfp4_gemv_sk_own_nt3_xg(SK_PARAMS) {
    own_body<3, 3, true, true>(SK_ARGS);
}
// Session 25 (device run 8): 25-32 rows on block-owned tiles, 3 chunks in flight, one sum (SPLIT lost: 6144x5120
// M = 25 16.4 against 14.9; 2 chunks 16.3, 2 with SPLIT 15.0), against ops.linear's wgmma GEMM, M = 25 / 32 us:
// 6144x5120 17.5 / 14.9, 17.5 / 15.8; 5120x6144 19.0 / 15.7, 19.2 / 17.0; 10240x5120 24.3 / 21.0, 24.5 / 22.6;
// 17408x5120 36.5 / 32.6, 36.7 / 35.1; not where the GEMM's 128-row tiles fill 80-100% of the SMs (16384x5120 28.4 /
// 29.2), 34816x5120 (60.1 / 57.9, 59.8 / 62.7) nor K = 17408 (32.8 / 35.5)
extern "C" __global__ void __launch_bounds__(SK_THREADS, 1) nvfp4_gemv_sk_own_nt4_xg(SK_PARAMS) {
    own_body<4, 3, true, false>(SK_ARGS);
}
