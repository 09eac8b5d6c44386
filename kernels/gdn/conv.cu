// conv.cu: causal depthwise conv1d (width KC = 4) + SiLU over GDN's mixed q|k|v channels, state per slot.
// gdn_conv_decode:  grid (ceil(C / 8 / 128), N), block 128; thread = (sequence n, 8 consecutive channels).
// gdn_conv_prefill: grid (ceil(C / 8 / 128), num_chunks, P), block 128; thread = (piece of a 64-token chunk, 8
//   channels), sliding the window over the piece's tokens (the KC-1 before it read from x). A chunk's P pieces
//   are max(KC-1, ceil(len / P)) tokens long, so only piece 0 of a sequence's FIRST chunk reaches back before the
//   sequence: that thread alone reads the old conv state and writes the new one, so no other thread races on the
//   slot. P > 1 puts more loads in flight: one thread's window slide is a chain of dependent steps.
// State pool [S, C, KC-1] (oldest input first) in CONV_T: f32 (CONV_BF16=0) or bf16 (CONV_BF16=1).
// y[t, c] = silu(sum_j w[c, j] * xx[t - (KC-1) + j, c]), xx = [state ; x] per sequence (model-spec 1.8).
#include "gdn_common.cuh"

#define KC 4
#define CPT 8

#if CONV_BF16
typedef u16 conv_t;
__device__ __forceinline__ float cv2f(conv_t x) { return bf2f(x); }
__device__ __forceinline__ conv_t f2cv(float x) { return f2bf(x); }
#else
typedef float conv_t;
__device__ __forceinline__ float cv2f(conv_t x) { return x; }
__device__ __forceinline__ conv_t f2cv(float x) { return x; }
#endif

__device__ __forceinline__ void load_x8(const u16* p, float (&x)[CPT]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  x[0] = bflo(u.x); x[1] = bfhi(u.x); x[2] = bflo(u.y); x[3] = bfhi(u.y);
  x[4] = bflo(u.z); x[5] = bfhi(u.z); x[6] = bflo(u.w); x[7] = bfhi(u.w);
}

// x * rcp(1 + e^-x): the approximate reciprocal is far cheaper than IEEE division; rcp(inf) = 0 keeps x << 0 at 0
__device__ __forceinline__ float silu(float x) { return x * __frcp_rn(1.f + __expf(-x)); }

// win[i][0..KC-1] oldest..newest inputs of channel i; writes y for the 8 channels as one 16-byte store.
__device__ __forceinline__ void conv_out(const float (&w)[CPT][KC], const float (&win)[CPT][KC], u16* yp) {
  float y[CPT];
#pragma unroll
  for (int i = 0; i < CPT; ++i) {
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < KC; ++j) acc += w[i][j] * win[i][j];
    y[i] = silu(acc);
  }
  *reinterpret_cast<uint4*>(yp) = make_uint4(pack_bf2(y[0], y[1]), pack_bf2(y[2], y[3]), pack_bf2(y[4], y[5]),
                                             pack_bf2(y[6], y[7]));
}

__device__ __forceinline__ void load_w(const float* weight, int c0, float (&w)[CPT][KC]) {
#pragma unroll
  for (int i = 0; i < CPT; ++i)
#pragma unroll
    for (int j = 0; j < KC; ++j) w[i][j] = weight[(c0 + i) * KC + j];
}

// 8 channels x (KC-1) state values of one thread: 48 (bf16) or 96 (f32) contiguous bytes, 16-byte aligned.
#define SV (CPT * (KC - 1) * (int)sizeof(conv_t) / 16)
#define NSV (CPT * (KC - 1))

__device__ __forceinline__ void unpack_conv_state(const uint4 (&b)[SV], float (&x)[NSV]) {
#pragma unroll
  for (int idx = 0; idx < NSV; ++idx) {
    const int byte = idx * (int)sizeof(conv_t), sel = (byte >> 2) & 3;
    const uint4 u = b[byte >> 4];
    const u32 w = sel == 0 ? u.x : (sel == 1 ? u.y : (sel == 2 ? u.z : u.w));
#if CONV_BF16
    x[idx] = (idx & 1) ? bfhi(w) : bflo(w);
#else
    x[idx] = __uint_as_float(w);
#endif
  }
}

__device__ __forceinline__ void pack_conv_state(const float (&x)[NSV], uint4 (&b)[SV]) {
  u32 w[SV * 4];
#pragma unroll
  for (int k = 0; k < SV * 4; ++k) {
#if CONV_BF16
    w[k] = pack_bf2(x[2 * k], x[2 * k + 1]);
#else
    w[k] = __float_as_uint(x[k]);
#endif
  }
#pragma unroll
  for (int m = 0; m < SV; ++m) b[m] = make_uint4(w[4 * m], w[4 * m + 1], w[4 * m + 2], w[4 * m + 3]);
}

// x [N, C] bf16 (token stride s_x); weight [C, KC] f32; pool [S, C, KC-1] (slot stride s_slot, a multiple of
// 8 elements); slot_ids [N] (< 0: skip); y [N, C] bf16. All state accesses are 16-byte vectors.
extern "C" __global__ void __launch_bounds__(128)
gdn_conv_decode(const u16* __restrict__ x, long long s_x, const float* __restrict__ weight,
                conv_t* __restrict__ pool, long long s_slot, const int* __restrict__ slot_ids, u16* __restrict__ y,
                int C) {
  pdl_allow_dependents();  // the recurrent decode after it may launch and load its state now (_decode.py)
  const int n = blockIdx.y, c0 = (blockIdx.x * blockDim.x + threadIdx.x) * CPT;
  if (c0 >= C) return;
  const int slot = slot_ids[n];
  if (slot < 0) return;
  uint4* st = reinterpret_cast<uint4*>(pool + (long long)slot * s_slot + c0 * (KC - 1));
  uint4 raw[SV];
#pragma unroll
  for (int m = 0; m < SV; ++m) raw[m] = st[m];
  float w[CPT][KC], win[CPT][KC], xn[CPT], old[NSV];
  const float4* w4 = reinterpret_cast<const float4*>(weight + c0 * KC);
#pragma unroll
  for (int i = 0; i < CPT; ++i) {
    const float4 f = w4[i];
    w[i][0] = f.x; w[i][1] = f.y; w[i][2] = f.z; w[i][3] = f.w;
  }
  load_x8(x + n * s_x + c0, xn);
  unpack_conv_state(raw, old);
#pragma unroll
  for (int i = 0; i < CPT; ++i) {
#pragma unroll
    for (int j = 0; j < KC - 1; ++j) win[i][j] = old[i * (KC - 1) + j];
    win[i][KC - 1] = xn[i];
  }
  conv_out(w, win, y + (long long)n * C + c0);
#pragma unroll
  for (int i = 0; i < CPT; ++i)
#pragma unroll
    for (int j = 0; j < KC - 1; ++j) old[i * (KC - 1) + j] = win[i][j + 1];
  pack_conv_state(old, raw);
#pragma unroll
  for (int m = 0; m < SV; ++m) st[m] = raw[m];
}

// x [T, C] bf16 (token stride s_x); chunks [num_chunks, 4] int32 = (seq n, first token, length, index in seq);
// cu_seqlens [N+1] int32; has_init [N] int32 (0: the sequence starts from a zero state); y [T, C] bf16.
extern "C" __global__ void __launch_bounds__(128)
gdn_conv_prefill(const u16* __restrict__ x, long long s_x, const float* __restrict__ weight,
                 conv_t* __restrict__ pool, long long s_slot, const int* __restrict__ slot_ids,
                 const int* __restrict__ chunks,
                 const int* __restrict__ cu_seqlens, const int* __restrict__ has_init, u16* __restrict__ y,
                 int C) {
  const int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * CPT;
  if (c0 >= C) return;
  const int4 ch = reinterpret_cast<const int4*>(chunks)[blockIdx.y];
  const int piece = max(KC - 1, ((int)ch.z + (int)gridDim.z - 1) / (int)gridDim.z);
  const int lo = blockIdx.z * piece, len = min(ch.z, lo + piece) - lo;
  if (len <= 0) return;
  const int n = ch.x, t0 = ch.y + lo, seq0 = cu_seqlens[n], seq_len = cu_seqlens[n + 1] - seq0;
  const int slot = slot_ids[n];
  const bool first = ch.w == 0 && blockIdx.z == 0, use_state = first && slot >= 0 && has_init[n] != 0;
  conv_t* st = pool + (long long)(slot < 0 ? 0 : slot) * s_slot + c0 * (KC - 1);
  float w[CPT][KC], win[CPT][KC], old[CPT][KC - 1];
  load_w(weight, c0, w);
#pragma unroll
  for (int j = 0; j < KC - 1; ++j) {
    const int pos = t0 - seq0 - (KC - 1) + j;
    float xv[CPT];
    if (pos >= 0) load_x8(x + (long long)(seq0 + pos) * s_x + c0, xv);
#pragma unroll
    for (int i = 0; i < CPT; ++i) {
      old[i][j] = use_state ? cv2f(st[i * (KC - 1) + j]) : 0.f;
      win[i][j + 1] = pos >= 0 ? xv[i] : old[i][j];
    }
  }
#pragma unroll 8
  for (int t = 0; t < len; ++t) {
    float xv[CPT];
    load_x8(x + (long long)(t0 + t) * s_x + c0, xv);
#pragma unroll
    for (int i = 0; i < CPT; ++i) {
#pragma unroll
      for (int j = 0; j < KC - 1; ++j) win[i][j] = win[i][j + 1];
      win[i][KC - 1] = xv[i];
    }
    conv_out(w, win, y + (long long)(t0 + t) * C + c0);
  }
  if (!first || slot < 0) return;
#pragma unroll
  for (int j = 0; j < KC - 1; ++j) {
    const int pos = seq_len - (KC - 1) + j;
    float xv[CPT];
    if (pos >= 0) load_x8(x + (long long)(seq0 + pos) * s_x + c0, xv);
#pragma unroll
    for (int i = 0; i < CPT; ++i) {
      // constant-index select keeps old[][] in registers (pos < 0 only when seq_len < KC-1)
      const int src = KC - 1 + pos;
      const float prev = src <= 0 ? old[i][0] : (src == 1 ? old[i][1] : old[i][2]);
      st[i * (KC - 1) + j] = f2cv(pos >= 0 ? xv[i] : prev);
    }
  }
}
