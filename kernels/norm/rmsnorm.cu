// rmsnorm.cu: Qwen3.5's norms and the MLP's SiLU-and-multiply, bf16 in/out, f32 math, one launch each (sm_90).
// norm_rms_zc:    grid (R), block (NT = 32..1024, a multiple of 32); block r owns row r, thread i owns columns
//                 i, i + NT, ... of it (two passes: sum of squares, then scale; the second pass re-reads from L1/L2).
// norm_rms_gated: same mapping; row r = one dv-wide head vector of the GDN output, z read at the same (row, col)
//                 of z viewed as [T, H, D] (z_row: the GDN's z is a strided column view of the fused in_proj).
// silu_mul:       grid (min(ceil(T*I / 256), cap)), block 256; grid-stride loop, thread = one element (t, i).
// norm_rms_gated_w4, silu_mul_v8: vector forms of the two for aligned rows (one warp a row; 8 columns a thread),
//                 used by ops.py where alignment allows (the scalar forms serve the rest).
// Formulas: model-spec.md 1.5 (transformers Qwen3_5RMSNorm / Qwen3_5RMSNormGated), rounding as the torch code:
//   zero-centred: y = bf16(x * rsqrt(mean(x^2) + eps) * (1 + w)); with a residual, x := bf16(x + res) first and
//                 that sum is also written out (residual_out), as `h = x + residual` in bf16 does.
//   gated:        xn = bf16(x * rsqrt(mean(x^2) + eps)); y = bf16(w * xn); out = bf16(y * silu(z)), silu in f32.
//   silu_mul:     s = bf16(silu(gate)); out = bf16(s * up)   (F.silu(gate) * up on bf16 tensors).
// bf16 is carried as u16 (no CUDA headers: NVRTC or nvcc); conversions round to nearest even through PTX cvt.

typedef unsigned short u16;
typedef unsigned int u32;

__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float(((u32)h) << 16); }

__device__ __forceinline__ u16 f2bf(float x) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}

// programmatic dependent launch: a kernel launched after this one with the PDL attribute (the NVFP4 GEMV at M = 1,
// kernels/_pdl.py) may start now and stream its weights while this one runs (it waits for this grid's completion
// before it reads what this writes); a no-op for plain launches and before sm_90
__device__ __forceinline__ void allow_dependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// row r of the gate z viewed as [T, H, D] with token stride szt and head stride szh (elements): token r / H, head
// r % H. A column view of a fused projection split into heads is such a view without a copy; a plain [R, D] z has
// H = 1 (szh unused).
__device__ __forceinline__ const u16* z_row(const u16* z, long long r, long long szt, long long szh, int H) {
  return z + (r / H) * szt + (r % H) * szh;
}

// bf16 round trip of an f32 value (what a `.to(bfloat16)` between two torch ops does)
__device__ __forceinline__ float rbf(float x) { return bf2f(f2bf(x)); }

// exact (not approximate) SiLU in f32, as torch: x / (1 + exp(-x))
__device__ __forceinline__ float silu_f(float x) { return x / (1.f + expf(-x)); }

// sum of v over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < nwarps ? partial[lane] : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// x [R, D] bf16 (row stride sx); res, res_out [R, D] (row strides sr, sro; res == nullptr: no residual; res_out
// may alias res or x: each element is read and written by one thread); w [D] bf16; out [R, D] (row stride so).
extern "C" __global__ void norm_rms_zc(const u16* x, long long sx, const u16* res, long long sr, u16* res_out,
                                       long long sro, const u16* __restrict__ w, u16* __restrict__ out, long long so,
                                       int D, float eps) {
  allow_dependents();
  const long long r = blockIdx.x;
  const u16* xr = x + r * sx;
  float ss = 0.f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float v = bf2f(xr[i]);
    if (res != nullptr) {
      const u16 s = f2bf(v + bf2f(res[r * sr + i]));
      res_out[r * sro + i] = s;
      v = bf2f(s);
    }
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / (float)D + eps);
  const u16* src = res != nullptr ? res_out + r * sro : xr;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    out[r * so + i] = f2bf(bf2f(src[i]) * inv * (1.f + bf2f(w[i])));
  }
}

// norm_rms_zc_v8: norm_rms_zc for D % 8 == 0, D <= 8 * blockDim.x, every row start and w 16-byte aligned (ops.py
// checks): thread i owns columns [8i, 8i + 8) and keeps them in registers between the two passes (16-byte loads and
// stores, one read of x / res / w, no re-read of res_out). Same per-element rounding as norm_rms_zc.
__device__ __forceinline__ void unpack8(const uint4& u, float (&v)[8]) {
  const u32 w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) v[2 * j] = __uint_as_float(w[j] << 16), v[2 * j + 1] = __uint_as_float(w[j] & 0xFFFF0000u);
}

__device__ __forceinline__ uint4 pack8(const float (&v)[8]) {
  u32 w[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) w[j] = (u32)f2bf(v[2 * j]) | ((u32)f2bf(v[2 * j + 1]) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

extern "C" __global__ void norm_rms_zc_v8(const u16* x, long long sx, const u16* res, long long sr, u16* res_out,
                                          long long sro, const u16* __restrict__ w, u16* __restrict__ out,
                                          long long so, int D, float eps) {
  allow_dependents();
  const long long r = blockIdx.x;
  const int c = threadIdx.x * 8;
  const bool mine = c < D;
  float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  float ss = 0.f;
  if (mine) {
    unpack8(*reinterpret_cast<const uint4*>(x + r * sx + c), v);
    if (res != nullptr) {
      float rv[8];
      unpack8(*reinterpret_cast<const uint4*>(res + r * sr + c), rv);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = rbf(v[j] + rv[j]);
      *reinterpret_cast<uint4*>(res_out + r * sro + c) = pack8(v);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += v[j] * v[j];
  }
  const float inv = rsqrtf(block_sum(ss) / (float)D + eps);
  if (!mine) return;
  float wv[8];
  unpack8(*reinterpret_cast<const uint4*>(w + c), wv);
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = v[j] * inv * (1.f + wv[j]);
  *reinterpret_cast<uint4*>(out + r * so + c) = pack8(v);
}

// x, z [R, D] bf16 (row strides sx, sz; z may be a column view of a wider projection); w [D] bf16; out [R, D]
// (row stride so).
extern "C" __global__ void norm_rms_gated(const u16* __restrict__ x, long long sx, const u16* __restrict__ z,
                                          long long szt, long long szh, int H, const u16* __restrict__ w,
                                          u16* __restrict__ out, long long so, int D, float eps) {
  allow_dependents();
  const long long r = blockIdx.x;
  const u16* xr = x + r * sx;
  const u16* zr = z_row(z, r, szt, szh, H);
  float ss = 0.f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    const float v = bf2f(xr[i]);
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / (float)D + eps);
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    const float y = rbf(bf2f(w[i]) * rbf(bf2f(xr[i]) * inv));
    out[r * so + i] = f2bf(y * silu_f(bf2f(zr[i])));
  }
}

// gate, up [T, I] bf16 (row strides sg, su: column views of one fused projection work); out [T, I] contiguous.
extern "C" __global__ void silu_mul(const u16* __restrict__ gate, long long sg, const u16* __restrict__ up,
                                    long long su, u16* __restrict__ out, long long T, int I) {
  allow_dependents();
  const long long total = T * (long long)I;
  for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < total;
       idx += (long long)gridDim.x * blockDim.x) {
    const long long t = idx / I;
    const int i = (int)(idx - t * I);
    const float s = rbf(silu_f(bf2f(gate[t * sg + i])));
    out[idx] = f2bf(s * bf2f(up[t * su + i]));
  }
}

// norm_rms_gated_w4: norm_rms_gated for D % 4 == 0 with x, z rows, w and out 8-byte aligned (ops.py checks), one
// warp per row (8 rows per 256-thread block, grid ceil(R / 8)): lane l owns columns [4l + 128 p, +4), 8-byte loads,
// a warp-shuffle sum instead of the block barrier (the GDN output has T x HV rows of only dv = 128). Same rounding.
__device__ __forceinline__ void unpack4(const uint2& u, float (&v)[4]) {
  v[0] = __uint_as_float(u.x << 16), v[1] = __uint_as_float(u.x & 0xFFFF0000u);
  v[2] = __uint_as_float(u.y << 16), v[3] = __uint_as_float(u.y & 0xFFFF0000u);
}

extern "C" __global__ void norm_rms_gated_w4(const u16* __restrict__ x, long long sx, const u16* __restrict__ z,
                                             long long szt, long long szh, int H, const u16* __restrict__ w,
                                             u16* __restrict__ out, long long so, long long R, int D, float eps) {
  allow_dependents();
  const long long r = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= R) return;
  const u16* xr = x + r * sx;
  const u16* zr = z_row(z, r, szt, szh, H);
  float ss = 0.f;
  for (int c = 4 * lane; c < D; c += 128) {
    float v[4];
    unpack4(*reinterpret_cast<const uint2*>(xr + c), v);
    ss += v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = rsqrtf(ss / (float)D + eps);
  for (int c = 4 * lane; c < D; c += 128) {
    float v[4], zv[4], wv[4];
    unpack4(*reinterpret_cast<const uint2*>(xr + c), v);
    unpack4(*reinterpret_cast<const uint2*>(zr + c), zv);
    unpack4(*reinterpret_cast<const uint2*>(w + c), wv);
    u16 o[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) o[j] = f2bf(rbf(wv[j] * rbf(v[j] * inv)) * silu_f(zv[j]));
    *reinterpret_cast<uint2*>(out + r * so + c) = make_uint2((u32)o[0] | ((u32)o[1] << 16), (u32)o[2] | ((u32)o[3] << 16));
  }
}

// silu_mul_v8: silu_mul for I % 8 == 0 with gate, up rows 16-byte aligned (ops.py checks): grid (ceil(I / 2048), T),
// block 256, thread = 8 consecutive columns of one row (16-byte loads and stores, no index division). Same rounding.
extern "C" __global__ void silu_mul_v8(const u16* __restrict__ gate, long long sg, const u16* __restrict__ up,
                                       long long su, u16* __restrict__ out, int I) {
  allow_dependents();
  const long long t = blockIdx.y;
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (c >= I) return;
  float g[8], u[8];
  unpack8(*reinterpret_cast<const uint4*>(gate + t * sg + c), g);
  unpack8(*reinterpret_cast<const uint4*>(up + t * su + c), u);
#pragma unroll
  for (int j = 0; j < 8; ++j) g[j] = rbf(silu_f(g[j])) * u[j];
  *reinterpret_cast<uint4*>(out + t * (long long)I + c) = pack8(g);
}
