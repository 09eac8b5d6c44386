// recurrent_tma_loop.cuh (included by recurrent_tma.cu, after its per-item steps): a block's walk over its items,
// with (STAGE_AHEAD) or without the next item's inputs staged during this one, and thread 0's stage refills.
#pragma once

// thread 0, after item j's tile has landed: refill the stage of local item `refill` (the item before) with item
// refill + STAGES once that item's bulk store has read it
__device__ __forceinline__ void refill_stage(const DecodeArgs& p, int& refill, int mine, unsigned char* tiles,
                                             Smem& sm) {
  if (threadIdx.x != 0 || refill < 0) return;
  if (refill + STAGES < mine) bulk_wait_read(), issue_load(p, refill + STAGES, tiles, sm);
  refill = -1;
}

#if !STAGE_AHEAD
// the block's `mine` items in order: the item's inputs staged by warps 0 and 1, its tile waited for, a barrier
__device__ __forceinline__ void run_items(const DecodeArgs& p, int mine, unsigned char* tiles, Smem& sm) {
  Item it = fetch_item(p, blockIdx.x);
  __syncthreads();
  int refill = -1;  // thread 0: local item whose stage is refilled (with item refill + STAGES) next iteration
  for (int j = 0; j < mine; ++j) {
    const int s = j % STAGES;
    const Item cur = it;
    if (j + 1 < mine) it = fetch_item(p, local_item(p, j + 1));
    if (cur.slot >= 0) {  // uniform over the block
      stage_inputs(p, cur, sm, 0);
      mbar_wait(&sm.bar[s], (j / STAGES) & 1);
      __syncthreads();
    }
    refill_stage(p, refill, mine, tiles, sm);
    // a padding row had no load issued (nothing to store): its stage is refilled at the next item all the same
    if (cur.slot >= 0) process_item(p, cur, cur, false, reinterpret_cast<uint4*>(tiles + s * TILE_BYTES), sm, 0);
    if (threadIdx.x == 0) refill = j;
  }
}
#else
// the block's `mine` items in order, item j's inputs in buffer j & 1, staged during item j - 1 (process_item)
__device__ __forceinline__ void run_items(const DecodeArgs& p, int mine, unsigned char* tiles, Smem& sm) {
  Item cur = fetch_item(p, blockIdx.x), nxt = cur;
  stage_inputs(p, cur, sm, 0);
  if (mine > 1) nxt = fetch_item(p, local_item(p, 1));
  __syncthreads();
  int refill = -1;
  for (int j = 0; j < mine; ++j) {
    const int s = j % STAGES, buf = j & 1;
    const bool has_next = j + 1 < mine;
    if (cur.slot >= 0) mbar_wait(&sm.bar[s], (j / STAGES) & 1);  // uniform over the block
    refill_stage(p, refill, mine, tiles, sm);
    if (cur.slot >= 0) {
      process_item(p, cur, nxt, has_next, reinterpret_cast<uint4*>(tiles + s * TILE_BYTES), sm, buf);
    } else {  // a padding row: nothing to compute or store, the next item's inputs all the same
      if (has_next) stage_inputs(p, nxt, sm, buf ^ 1);
      __syncthreads();
    }
    cur = nxt;
    if (j + 2 < mine) nxt = fetch_item(p, local_item(p, j + 2));
    if (threadIdx.x == 0) refill = j;
  }
}
#endif
