// NVFP4 weight x bf16 activations for M > 32 rows (prefill, wide batches): y[M, N] = x[M, K] W^T, f32 acc, bf16 out.
//
// Grid (Np/128, ceil(M/128)); block = 128 threads = 4 warps as 2 (N) x 2 (M). Block (bx, by) computes weight rows
// [128 bx, +128) x tokens [128 by, +128); warp (wn, wm) = (warp & 1, warp >> 1) owns 4 row tiles of 16 rows
// (rows 128 bx + 64 wn + ...) x 8 n8 tiles of tokens (128 by + 64 wm + ...): 128 f32 accumulators per lane.
// K loop over 64-wide chunks: the x tile [128 tokens][64 k] bf16 goes to shared memory with cp.async (2 stages, rows
// padded to 144 B so the lanes' 16-byte reads are bank-conflict free); each warp loads its 4 weight fragments of
// 16 B/lane (repacked layout, common.cuh) one chunk ahead into registers and dequantizes them to bf16 A registers
// in-register (the tile "in shared memory" is the x tile; weights never need a shared-memory copy because each
// lane's fragment already is its MMA operand). mma.sync m16n8k16 bf16, f32 accumulate; epilogue scales by
// alpha[16-row tile] (= gmul * 2^62; fused shards may carry different global scales).
#include "common.cuh"

#define ROW_BYTES 144
#define TILE_BYTES (128 * ROW_BYTES)

__device__ __forceinline__ void load_x_tile(unsigned char* xs, const u16* x, int M, int K, int m0, int c) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int idx = threadIdx.x + 128 * i, row = idx >> 3, seg = idx & 7;
        const int m = m0 + row, k = c * 64 + seg * 8;
        const bool ok = m < M && k < K;
        cp_async16(xs + row * ROW_BYTES + seg * 16, ok ? x + (u64)m * K + k : x, ok);
    }
    asm volatile("cp.async.commit_group;");
}

__device__ __forceinline__ void load_w(const uint4* wq, const u16* wsc, int tile0, int Kc, int c, uint4 (&w)[4],
                                       u32 (&s)[4]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int rt = 0; rt < 4; ++rt) {
        const size_t off = ((u64)(tile0 + rt) * Kc + c) * 32 + lane;
        w[rt] = ld_nc16(wq + off);
        s[rt] = ld_nc_u16(wsc + off);
    }
}

__device__ __forceinline__ void gemm_chunk(const unsigned char* xs, const uint4 (&w)[4], const u32 (&s)[4],
                                           const u32* lut, float (&acc)[4][8][4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wm = threadIdx.x >> 6;
    const unsigned char* xb = xs + (wm * 64 + g) * ROW_BYTES + t * 32;
    u32 sg[4], sg8[4];
#pragma unroll
    for (int rt = 0; rt < 4; ++rt) { sg[rt] = lut[s[rt] & 0xFFu]; sg8[rt] = lut[s[rt] >> 8]; }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        uint4 b[8];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) b[nt] = *(const uint4*)(xb + nt * 8 * ROW_BYTES + half * 16);
#pragma unroll
        for (int sub = 0; sub < 2; ++sub) {
#pragma unroll
            for (int rt = 0; rt < 4; ++rt) {
                u32 a[4];
                decode_word(word_of(w[rt], half * 2 + sub), sg[rt], sg8[rt], a);
#pragma unroll
                for (int nt = 0; nt < 8; ++nt) mma_bf16(acc[rt][nt], a, sub ? b[nt].z : b[nt].x, sub ? b[nt].w : b[nt].y);
            }
        }
    }
}

__device__ __forceinline__ void gemm_store(u16* y, int M, int N, int tile0, int m0, const float* alpha,
                                           const float (&acc)[4][8][4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int rt = 0; rt < 4; ++rt) {
        const float a = alpha[tile0 + rt];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int n = (tile0 + rt) * 16 + g + (i >> 1) * 8, m = m0 + nt * 8 + 2 * t + (i & 1);
                if (m < M && n < N) y[(u64)m * N + n] = f32_to_bf16(acc[rt][nt][i] * a);
            }
    }
}

extern "C" __global__ void __launch_bounds__(128, 2)
nvfp4_gemm(const uint4* wq, const u16* wsc, const u16* x, u16* y, const float* alpha, int M, int N, int K, int Kc) {
    __shared__ __align__(16) unsigned char xs[2][TILE_BYTES];
    __shared__ u32 lut[256];
    lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    lut[threadIdx.x + 128] = e4m3_scaled_bf16x2(threadIdx.x + 128);
    const int warp = threadIdx.x >> 5, wn = warp & 1, wm = warp >> 1;
    const int tile0 = blockIdx.x * 8 + wn * 4, m_block = blockIdx.y * 128;
    float acc[4][8][4];
#pragma unroll
    for (int rt = 0; rt < 4; ++rt)
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) acc[rt][nt][0] = acc[rt][nt][1] = acc[rt][nt][2] = acc[rt][nt][3] = 0.0f;
    uint4 w[4], wn_next[4];
    u32 s[4], s_next[4];
    load_x_tile(xs[0], x, M, K, m_block, 0);
    load_w(wq, wsc, tile0, Kc, 0, w, s);
    for (int c = 0; c < Kc; ++c) {
        if (c + 1 < Kc) {
            load_x_tile(xs[(c + 1) & 1], x, M, K, m_block, c + 1);
            load_w(wq, wsc, tile0, Kc, c + 1, wn_next, s_next);
        } else {
            asm volatile("cp.async.commit_group;");
        }
        asm volatile("cp.async.wait_group 1;" ::: "memory");
        __syncthreads();
        gemm_chunk(xs[c & 1], w, s, lut, acc);
        __syncthreads();
#pragma unroll
        for (int rt = 0; rt < 4; ++rt) { w[rt] = wn_next[rt]; s[rt] = s_next[rt]; }
    }
    gemm_store(y, M, N, tile0, m_block + wm * 64, alpha, acc);
}

// v2: block tile 128 rows x 128 tokens as 4 (N) x 1 (M) warps; warp w owns 2 row tiles (rows 128 bx + 32 w ...) x all
// 16 n8 token tiles, so each weight fragment is decoded by exactly one warp (v1 decodes it twice) and the decode:MMA
// ratio halves; B (x) fragments are read per n8 tile and used for both k-steps of a half-chunk.
__device__ __forceinline__ void gemm2_chunk(const unsigned char* xs, const uint4 (&w)[2], const u32 (&s)[2],
                                            const u32* lut, float (&acc)[2][16][4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const unsigned char* xb = xs + g * ROW_BYTES + t * 32;
    u32 sg[2], sg8[2];
#pragma unroll
    for (int rt = 0; rt < 2; ++rt) { sg[rt] = lut[s[rt] & 0xFFu]; sg8[rt] = lut[s[rt] >> 8]; }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        u32 a[2][2][4];
#pragma unroll
        for (int rt = 0; rt < 2; ++rt)
#pragma unroll
            for (int sub = 0; sub < 2; ++sub) decode_word(word_of(w[rt], half * 2 + sub), sg[rt], sg8[rt], a[rt][sub]);
#pragma unroll
        for (int nt = 0; nt < 16; ++nt) {
            const uint4 b = *(const uint4*)(xb + nt * 8 * ROW_BYTES + half * 16);
#pragma unroll
            for (int sub = 0; sub < 2; ++sub)
#pragma unroll
                for (int rt = 0; rt < 2; ++rt) mma_bf16(acc[rt][nt], a[rt][sub], sub ? b.z : b.x, sub ? b.w : b.y);
        }
    }
}

__device__ __forceinline__ void load_w2(const uint4* wq, const u16* wsc, int tile0, int Kc, int c, uint4 (&w)[2],
                                        u32 (&s)[2]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int rt = 0; rt < 2; ++rt) {
        const u64 off = ((u64)(tile0 + rt) * Kc + c) * 32 + lane;
        w[rt] = ld_stream16(wq + off);
        s[rt] = ld_stream_u16(wsc + off);
    }
}

__device__ __forceinline__ void gemm2_store(u16* y, int M, int N, int tile0, int m0, const float* alpha,
                                            const float (&acc)[2][16][4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int rt = 0; rt < 2; ++rt) {
        const float a = alpha[tile0 + rt];
#pragma unroll
        for (int nt = 0; nt < 16; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int n = (tile0 + rt) * 16 + g + (i >> 1) * 8, m = m0 + nt * 8 + 2 * t + (i & 1);
                if (m < M && n < N) y[(u64)m * N + n] = f32_to_bf16(acc[rt][nt][i] * a);
            }
    }
}

extern "C" __global__ void __launch_bounds__(128, 2)
nvfp4_gemm_v2(const uint4* wq, const u16* wsc, const u16* x, u16* y, const float* alpha, int M, int N, int K,
              int Kc) {
    __shared__ __align__(16) unsigned char xs[2][TILE_BYTES];
    __shared__ u32 lut[256];
    lut[threadIdx.x] = e4m3_scaled_bf16x2(threadIdx.x);
    lut[threadIdx.x + 128] = e4m3_scaled_bf16x2(threadIdx.x + 128);
    const int tile0 = blockIdx.x * 8 + (threadIdx.x >> 5) * 2, m_block = blockIdx.y * 128;
    float acc[2][16][4];
#pragma unroll
    for (int rt = 0; rt < 2; ++rt)
#pragma unroll
        for (int nt = 0; nt < 16; ++nt) acc[rt][nt][0] = acc[rt][nt][1] = acc[rt][nt][2] = acc[rt][nt][3] = 0.0f;
    uint4 w[2], w_next[2];
    u32 s[2], s_next[2];
    load_x_tile(xs[0], x, M, K, m_block, 0);
    load_w2(wq, wsc, tile0, Kc, 0, w, s);
    for (int c = 0; c < Kc; ++c) {
        if (c + 1 < Kc) {
            load_x_tile(xs[(c + 1) & 1], x, M, K, m_block, c + 1);
            load_w2(wq, wsc, tile0, Kc, c + 1, w_next, s_next);
        } else {
            asm volatile("cp.async.commit_group;");
        }
        asm volatile("cp.async.wait_group 1;" ::: "memory");
        __syncthreads();
        gemm2_chunk(xs[c & 1], w, s, lut, acc);
        __syncthreads();
#pragma unroll
        for (int rt = 0; rt < 2; ++rt) { w[rt] = w_next[rt]; s[rt] = s_next[rt]; }
    }
    gemm2_store(y, M, N, tile0, m_block, alpha, acc);
}
