// recurrent_tma.cu: fused recurrent Gated DeltaNet decode (same arguments and math as recurrent.cu, plus N), with
// the state tiles streamed through shared memory by the Tensor Memory Accelerator (cp.async.bulk, sm_90).
//
// Persistent grid: block b owns the work items (n, hv) = item / HV, item % HV for item = b, b + G, b + 2G, ...
// Each item's state tile pool[slot_ids[n], hv] ([K=128, V=128] contiguous: 32 KB bf16, 64 KB f32) is one bulk
// copy into stage j % STAGES of a shared-memory ring, completing on that stage's mbarrier (transaction count),
// issued STAGES - 1 items ahead; the new state is written back to the same stage and leaves by one bulk store, so
// loads, arithmetic and stores of consecutive items overlap and bytes in flight cost no registers.
// Per item: warp 0 l2-normalises q and k (times scale) and computes the gates, warp 1 stages v (both from registers
// loaded one item ahead); thread (rg, cg) reads rows rg + RG p (p < PASSES), columns cg*VEC .. +VEC of the tile
// (16 B), sums S^T k and S^T q; 128 threads finish one column each
// (d = beta (v - e^g S^T k), o = e^g S^T q + d (k.q), model-spec 1.7 rearranged as in recurrent.cu);
// every thread then writes S' = e^g S + k d^T over what it read.
#include "gdn_common.cuh"

#define KD 128
#define VD 128
#if STATE_BF16
typedef u16 state_t;
#define VEC 8
#else
typedef float state_t;
#define VEC 4
#endif
#define THREADS 256
#define NWARP (THREADS / 32)
#define TPR (VD / VEC)      // threads per 128-column row: 16 (bf16), 32 (f32)
#define RG (THREADS / TPR)  // rows per pass
#define PASSES (KD / RG)
#define TILE_BYTES (KD * VD * (int)sizeof(state_t))
#ifndef STAGES
#define STAGES 3
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2
#endif
// COPY_ONLY: timing diagnostic, the tile goes back unchanged (no arithmetic, wrong results): the floor of this
// load / store pipeline (H200, bf16 state, N = 32: 29.3 us against 32.0 with the arithmetic; bench/gpu_gdn_variants)
#ifndef COPY_ONLY
#define COPY_ONLY 0
#endif
// STAGE_AHEAD: warps 4 and 5 stage the next item's q, k, gates and v into the other of two input buffers while
// threads 0..127 finish this item's columns, so an item starts when its tile lands, with no block barrier first
#ifndef STAGE_AHEAD
#define STAGE_AHEAD 0
#endif
#if STAGE_AHEAD
#define IN_WARP 4
#define NBUF 2
#else
#define IN_WARP 0
#define NBUF 1
#endif

struct DecodeArgs {
  const u16 *q, *k;
  long long s_qk;
  const u16* v;
  long long s_v;
  const u16 *a, *b;
  long long s_ab;
  const float *a_log, *dt_bias;
  state_t* pool;
  long long s_slot;
  const int* slot_ids;
  out_t* o;
  int H, HV;
  float scale;
  int total;  // N * HV items
};

// an item's small inputs, loaded one item ahead: warp IN_WARP q and k (4 bf16 a lane) and the gate inputs, the next
// warp v
struct Item {
  int n, hv, slot;
  uint2 x0, x1;
  float a, b, a_log, dt_bias;
};

__device__ __forceinline__ Item fetch_item(const DecodeArgs& p, int item) {
  Item it;
  it.n = item / p.HV;
  it.hv = item - it.n * p.HV;
  it.slot = p.slot_ids[it.n];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp == IN_WARP) {
    const long long qk = it.n * p.s_qk + (long long)(it.hv / (p.HV / p.H)) * KD + 4 * lane;
    it.x0 = *reinterpret_cast<const uint2*>(p.q + qk);
    it.x1 = *reinterpret_cast<const uint2*>(p.k + qk);
    it.a = bf2f(p.a[it.n * p.s_ab + it.hv]);
    it.b = bf2f(p.b[it.n * p.s_ab + it.hv]);
    it.a_log = p.a_log[it.hv];
    it.dt_bias = p.dt_bias[it.hv];
  } else if (warp == IN_WARP + 1) {
    it.x0 = *reinterpret_cast<const uint2*>(p.v + it.n * p.s_v + (long long)it.hv * VD + 4 * lane);
  }
  return it;
}

struct Smem {
  float qs[NBUF][KD], ks[NBUF][KD], vs[NBUF][VD], scal[NBUF][4], ds[VD];
  float red[NWARP][2][VD];
  u64 bar[STAGES];
};

// thread 0: the bulk load of local item j's tile into stage j % STAGES (an empty arrival for a padding slot)
__device__ __forceinline__ void issue_load(const DecodeArgs& p, int j, unsigned char* tiles, Smem& sm) {
  const int s = j % STAGES, item = blockIdx.x + j * gridDim.x;
  const int n = item / p.HV, hv = item - n * p.HV, slot = p.slot_ids[n];
  if (slot < 0) {
    mbar_expect_tx(&sm.bar[s], 0);
    return;
  }
  mbar_expect_tx(&sm.bar[s], TILE_BYTES);
  bulk_load(tiles + s * TILE_BYTES, p.pool + slot * p.s_slot + (long long)hv * (KD * VD), TILE_BYTES, &sm.bar[s]);
}

// warps IN_WARP and IN_WARP + 1: this item's normalised q, k, the gates and v into input buffer buf
__device__ __forceinline__ void stage_inputs(const DecodeArgs& p, const Item& it, Smem& sm, int buf) {
  const int warp = (threadIdx.x >> 5) - IN_WARP, lane = threadIdx.x & 31;
  if (warp == 1) {
    sm.vs[buf][4 * lane] = bflo(it.x0.x), sm.vs[buf][4 * lane + 1] = bfhi(it.x0.x);
    sm.vs[buf][4 * lane + 2] = bflo(it.x0.y), sm.vs[buf][4 * lane + 3] = bfhi(it.x0.y);
  }
  if (warp != 0) return;
  float qv[4] = {bflo(it.x0.x), bfhi(it.x0.x), bflo(it.x0.y), bfhi(it.x0.y)};
  float kv[4] = {bflo(it.x1.x), bfhi(it.x1.x), bflo(it.x1.y), bfhi(it.x1.y)};
  float sq = 0.f, sk = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) sq += qv[i] * qv[i], sk += kv[i] * kv[i];
  const float rq = rsqrtf(warp_sum(sq) + GDN_L2_EPS) * p.scale, rk = rsqrtf(warp_sum(sk) + GDN_L2_EPS);
  float dot = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    qv[i] *= rq, kv[i] *= rk, dot += qv[i] * kv[i];
    sm.qs[buf][4 * lane + i] = qv[i], sm.ks[buf][4 * lane + i] = kv[i];
  }
  dot = warp_sum(dot);
  if (lane == 0) {
    sm.scal[buf][0] = dot, sm.scal[buf][1] = __expf(gdn_gate(it.a, it.a_log, it.dt_bias));
    sm.scal[buf][2] = sigmoidf_(it.b);
  }
}

__device__ __forceinline__ void unpack(const uint4& u, float (&x)[VEC]) {
#if STATE_BF16
  const u32 w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) x[2 * i] = bflo(w[i]), x[2 * i + 1] = bfhi(w[i]);
#else
  x[0] = __uint_as_float(u.x), x[1] = __uint_as_float(u.y), x[2] = __uint_as_float(u.z), x[3] = __uint_as_float(u.w);
#endif
}
__device__ __forceinline__ uint4 pack(const float (&x)[VEC]) {
#if STATE_BF16
  return make_uint4(pack_bf2(x[0], x[1]), pack_bf2(x[2], x[3]), pack_bf2(x[4], x[5]), pack_bf2(x[6], x[7]));
#else
  return make_uint4(__float_as_uint(x[0]), __float_as_uint(x[1]), __float_as_uint(x[2]), __float_as_uint(x[3]));
#endif
}

// pass 1: this thread's rows of the tile into raw[], partial S^T k and S^T q of its columns into sm.red
__device__ __forceinline__ void reduce_tile(const uint4* tile, Smem& sm, uint4 (&raw)[PASSES], int buf) {
  const int tid = threadIdx.x, cg = tid % TPR, rg = tid / TPR, lane = tid & 31, warp = tid >> 5;
  float sk[VEC], sq[VEC];
#pragma unroll
  for (int c = 0; c < VEC; ++c) sk[c] = sq[c] = 0.f;
#pragma unroll
  for (int p = 0; p < PASSES; ++p) {
    raw[p] = tile[(rg + RG * p) * TPR + cg];
    float s[VEC];
    unpack(raw[p], s);
    const float kr = sm.ks[buf][rg + RG * p], qr = sm.qs[buf][rg + RG * p];
#pragma unroll
    for (int c = 0; c < VEC; ++c) sk[c] += s[c] * kr, sq[c] += s[c] * qr;
  }
  warp_sum_pairs<TPR>(sk, sq);
  if (lane < TPR) {
#pragma unroll
    for (int c = 0; c < VEC; ++c) sm.red[warp][0][cg * VEC + c] = sk[c], sm.red[warp][1][cg * VEC + c] = sq[c];
  }
}

// threads 0..127: column tid's d into sm.ds and its output o
__device__ __forceinline__ void finish_column(const DecodeArgs& p, const Item& it, Smem& sm, int buf) {
  const int col = threadIdx.x;
  if (col >= VD) return;
  float tk = 0.f, tq = 0.f;
#pragma unroll
  for (int w = 0; w < NWARP; ++w) tk += sm.red[w][0][col], tq += sm.red[w][1][col];
  const float kq = sm.scal[buf][0], decay = sm.scal[buf][1], beta = sm.scal[buf][2];
  const float d = beta * (sm.vs[buf][col] - decay * tk);
  sm.ds[col] = d;
  const float out = decay * tq + d * kq;
#if OUT_F32
  p.o[((long long)it.n * p.HV + it.hv) * VD + col] = out;
#else
  p.o[((long long)it.n * p.HV + it.hv) * VD + col] = f2bf(out);
#endif
}

// pass 2: S' = e^g S + k d^T over this thread's rows, back into the tile
__device__ __forceinline__ void update_tile(uint4* tile, const Smem& sm, const uint4 (&raw)[PASSES], int buf) {
  const int tid = threadIdx.x, cg = tid % TPR, rg = tid / TPR;
  const float decay = sm.scal[buf][1];
  float d[VEC];
#pragma unroll
  for (int c = 0; c < VEC; ++c) d[c] = sm.ds[cg * VEC + c];
#pragma unroll
  for (int p = 0; p < PASSES; ++p) {
    const float kr = sm.ks[buf][rg + RG * p];
    float s[VEC];
    unpack(raw[p], s);
#pragma unroll
    for (int c = 0; c < VEC; ++c) s[c] = decay * s[c] + kr * d[c];
    tile[(rg + RG * p) * TPR + cg] = pack(s);
  }
}

// the block's local item j (-1: none): round-robin over the persistent grid
__device__ __forceinline__ int local_item(const DecodeArgs& p, int j) {
  const int item = blockIdx.x + j * gridDim.x;
  return item < p.total ? item : -1;
}

// one item whose tile is in stage `tile` and inputs in buffer buf: the reduction, the outputs, the update in place,
// then (thread 0) the bulk store of the new state. STAGE_AHEAD: nxt staged into buffer buf ^ 1 meanwhile if has_next
__device__ __forceinline__ void process_item(const DecodeArgs& p, const Item& cur, const Item& nxt, bool has_next,
                                             uint4* tile, Smem& sm, int buf) {
#if !COPY_ONLY
  uint4 raw[PASSES];
  reduce_tile(tile, sm, raw, buf);
  __syncthreads();
  finish_column(p, cur, sm, buf);
  if (STAGE_AHEAD && has_next) stage_inputs(p, nxt, sm, buf ^ 1);
  __syncthreads();
  update_tile(tile, sm, raw, buf);
#endif
  fence_async_smem();
  __syncthreads();
  if (threadIdx.x == 0) bulk_store(p.pool + cur.slot * p.s_slot + (long long)cur.hv * (KD * VD), tile, TILE_BYTES);
}

#include "recurrent_tma_loop.cuh"

// q, k [N, H, K] bf16 (token stride s_qk), v [N, HV, V] bf16 (token stride s_v), a, b [N, HV] bf16 (stride s_ab);
// a_log, dt_bias [HV] f32; pool [S, HV, K, V] state_t (slot stride s_slot elements, 16-byte aligned), updated in
// place; slot_ids [N] int32 (< 0: skip); o [N, HV, V] out_t contiguous. Dynamic shared memory STAGES * TILE_BYTES.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gdn_recurrent_decode_tma(const u16* __restrict__ q, const u16* __restrict__ k, long long s_qk,
                         const u16* __restrict__ v, long long s_v, const u16* __restrict__ a,
                         const u16* __restrict__ b, long long s_ab, const float* __restrict__ a_log,
                         const float* __restrict__ dt_bias, state_t* __restrict__ pool, long long s_slot,
                         const int* __restrict__ slot_ids, out_t* __restrict__ o, int H, int HV, float scale, int N) {
  extern __shared__ __align__(128) unsigned char tiles[];
  __shared__ __align__(16) Smem sm;
  const DecodeArgs p{q, k, s_qk, v, s_v, a, b, s_ab, a_log, dt_bias, pool, s_slot, slot_ids, o, H, HV, scale, N * HV};
  const int mine = (p.total - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x;
  pdl_allow_dependents();
  if (mine <= 0) {
    pdl_wait();
    return;
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) mbar_init(&sm.bar[s]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    fence_async_smem();
    for (int j = 0; j < STAGES && j < mine; ++j) issue_load(p, j, tiles, sm);
  }
  // programmatic dependent launch (_decode.py): the state copies and slot ids above are not written by the kernel
  // launched just before this one; q, k, v, a, b (fetch_item reads q, k and the gates) and every write wait for it
  pdl_wait();
  run_items(p, mine, tiles, sm);
  if (threadIdx.x == 0) bulk_wait_all();
}
