// gemm_ws_sk.cuh (included by gemm_wgmma.cu after gemm_ws.cuh and gemm_stream_k.cuh): stream-K with the
// warp-specialised main loop (the _ws_skm kernel, T = 128: decode batches of 65-128 rows, streamk.choice). The work
// split, the partial sums (ws[b], flags[b]) and the finisher are gemm_stream_k's with no whole tiles first: block b
// takes the chunk iterations [b L, (b + 1) L) of every output tile's Kc chunks in a row, L = ceil(iterations / G),
// one piece per tile it touches. The producer warp feeds the pieces' chunks through one ring without a break (ring
// chunk j = chunks of earlier pieces + i: stage j % S); the MMA warps free a piece's last stage when its groups
// retired, and stage the epilogue in their own shared memory after the ring (the producer is already filling the
// ring with the next piece). Session 17: the ws chunk is ~0.50-0.52 us against the _skm kernel's ~0.55 (NOTES.md).
#pragma once

// the MMA threads' side of one block: every piece summed, then stored for its finisher or finished here
template <int T, int S>
__device__ __forceinline__ void ws_sk_consume(u16* y, const float* alpha, int M, int N, int Kc, int R, int group,
                                              int vec_out, float* ws, int* flags, long long it, long long end,
                                              long long L, u32 base, u16* ot, const u32* lut, u32 full, u32 empty) {
    float acc[T / 2];
    for (int g = 0; it < end;) {
        const int u = (int)(it / Kc), c0 = (int)(it - (long long)u * Kc), nc = (int)min(end - it, (long long)(Kc - c0));
        const int2 o = tile_origin(u, M, T, R, group);
        ws_consume<T, S>(acc, nc, base, lut, full, empty, g, true);
        g += nc, it += nc;
        if (c0 > 0) {  // not the tile's chunk 0: the sums go to the finisher
            sk_store_piece<T, true>(acc, ws, flags, M - o.y);
            continue;
        }
        sk_add_pieces<T, true>(acc, ws, flags, (int)(((long long)(u + 1) * Kc - 1) / L), M - o.y);
        epilogue<T, true>(acc, ot, y, alpha, o.x, o.y, M, N, vec_out);
    }
}

// G = gridDim.x persistent blocks of WS_THREADS (one a SM, all resident: finishers spin on later blocks' flags)
template <int T, int S>
__device__ __forceinline__ void gemm_ws_sk_body(const unsigned char* wq, const unsigned char* wsc, const u16* xq,
                                                u16* y, const float* alpha, int M, int N, int Kc, int R, int group,
                                                int vec_out, float* ws, int* flags, int Mp) {
    extern __shared__ unsigned char dsmem[];
    __shared__ u32 lut[256];
    __shared__ __align__(8) u64 bars[2 * S];  // full[S], empty[S]
    const u32 raw = smem_u32(dsmem), base = (raw + 1023u) & ~1023u, full = smem_u32(bars), empty = full + 8 * S;
    ws_setup<S>(lut, full, empty);
    const long long iters = (long long)R * ((M + T - 1) / T) * Kc, L = (iters + gridDim.x - 1) / gridDim.x;
    long long it = blockIdx.x * L;
    const long long end = min(it + L, iters);
    if (threadIdx.x >= 256) {
        for (int g = 0; it < end;) {
            const int u = (int)(it / Kc), c0 = (int)(it - (long long)u * Kc);
            const int nc = (int)min(end - it, (long long)(Kc - c0));
            const int2 o = tile_origin(u, M, T, R, group);
            ws_produce<T, S>(wq, wsc, xq, Mp, Kc, o.x, o.y, c0, nc, base, full, empty, g);
            g += nc, it += nc;
        }
        return;
    }
    u16* ot = (u16*)(dsmem + (base - raw) + S * (T * 128 + 5120));  // the epilogue's staging, after the ring
    ws_sk_consume<T, S>(y, alpha, M, N, Kc, R, group, vec_out, ws, flags, it, end, L, base, ot, lut, full, empty);
}

// T = 128, 8 stages (2 more than gemm_ws's whole tiles take: the ring fills across a piece's end while the MMA warps
// finish it; session 17 device run 9, us at M = 128, 8 / 6 stages: 34816x5120 88.1 / 92.7, 17408x5120 50.1 / 53.3,
// 5120x17408 54.2 / 57.3, 6144x5120 26.4 / 27.1; the whole-tile kernels gain nothing from 8) + T x PITCH bf16 of
// epilogue staging (207.9 KB); args as the _ws kernels (splits unused)
extern "C" __global__ void __launch_bounds__(WS_THREADS, 1) nvfp4_gemm_ws_t128_skm(
        const unsigned char* wq, const unsigned char* wsc, const u16* xq, u16* y, const float* alpha, int M, int N,
        int K, int Kc, int R, int group, int vec_out, float* ws, int* flags, int splits, int Mp) {
    gemm_ws_sk_body<128, 8>(wq, wsc, xq, y, alpha, M, N, Kc, R, group, vec_out, ws, flags, Mp);
}
