"""Worker process: the device-resident paged KV pool (attention layers) and GDN state-slot pool."""
import torch

from worker.batch import to_device
from worker.config import ModelConfig

RECURRENT_DTYPE = torch.float32


class ModelCache:
    """All per-sequence decode state of one model replica.

    k_cache, v_cache  list (one per attention layer, in layer order) of [num_blocks, block_size, nKV, hd], `dtype`;
                      hold K after k_norm + RoPE, and V.
    recurrent_state   [Lg, S, HV, dk, dv] `state_dtype` (float32 by default, exact; bfloat16 halves the bytes a
                      decode step moves, GPU kernel path only), GDN delta-rule state per GDN layer and slot.
    conv_state        [Lg, S, conv_dim, Kc-1] `dtype`, the last Kc-1 pre-conv inputs, oldest first.
    Slots and blocks are handed out by the scheduler; the forward resets a slot whose row has context_len 0.
    """

    def __init__(self, config: ModelConfig, num_blocks: int, block_size: int, num_slots: int,
                 device="cpu", dtype=torch.bfloat16, state_dtype=RECURRENT_DTYPE):
        self.config = config
        self.num_blocks, self.block_size, self.num_slots = num_blocks, block_size, num_slots
        self.device, self.dtype = torch.device(device), dtype
        kv_shape = (num_blocks, block_size, config.num_key_value_heads, config.head_dim)
        num_attn = len(config.attention_layer_ids)
        self.k_cache = [torch.zeros(kv_shape, dtype=dtype, device=device) for _ in range(num_attn)]
        self.v_cache = [torch.zeros(kv_shape, dtype=dtype, device=device) for _ in range(num_attn)]
        num_gdn = len(config.gdn_layer_ids)
        self.recurrent_state = torch.zeros(
            num_gdn, num_slots, config.linear_num_value_heads, config.linear_key_head_dim,
            config.linear_value_head_dim, dtype=state_dtype, device=device)
        self.conv_state = torch.zeros(
            num_gdn, num_slots, config.conv_dim, config.linear_conv_kernel_dim - 1, dtype=dtype, device=device)

    def reset_fresh(self, state_slots: list, context_lens: list) -> None:
        """Zeroes the slots of the rows that start a sequence (context_len 0), from host lists of the step's rows
        (ForwardBatch.host_rows): nothing is read back from the device."""
        fresh = [slot for slot, context_len in zip(state_slots, context_lens) if context_len == 0]
        if fresh:
            self.reset_slots(to_device(fresh, self.device, torch.int64))

    def reset_slots(self, slots: torch.Tensor) -> None:
        """Zeroes the GDN recurrent and conv state of `slots` [n] int64 in every GDN layer."""
        if slots.numel():
            self.recurrent_state.index_fill_(1, slots, 0)  # index_fill_: no read back from the device
            self.conv_state.index_fill_(1, slots, 0)

    def copy_slots(self, src_slots: list, dst_slots: list) -> None:
        """GDN recurrent and conv state of `src_slots` [n] written over `dst_slots` [n] in every GDN layer (prefix
        cache snapshot / restore). All sources are read before any destination is written."""
        if not src_slots:
            return
        src = torch.tensor(src_slots, dtype=torch.int64, device=self.device)
        dst = torch.tensor(dst_slots, dtype=torch.int64, device=self.device)
        self.recurrent_state[:, dst] = self.recurrent_state[:, src]
        self.conv_state[:, dst] = self.conv_state[:, src]

    @staticmethod
    def bytes_per_block(config: ModelConfig, block_size: int, dtype=torch.bfloat16) -> int:
        """Bytes one KV block takes over all attention layers (K and V)."""
        itemsize = torch.empty((), dtype=dtype).element_size()
        per_layer = 2 * block_size * config.num_key_value_heads * config.head_dim * itemsize
        return per_layer * len(config.attention_layer_ids)

    @staticmethod
    def bytes_per_slot(config: ModelConfig, dtype=torch.bfloat16, state_dtype=RECURRENT_DTYPE) -> int:
        """Bytes one GDN state slot takes over all GDN layers (`state_dtype` recurrent + `dtype` conv state)."""
        itemsize = torch.empty((), dtype=dtype).element_size()
        state_size = torch.empty((), dtype=state_dtype).element_size()
        heads = config.linear_num_value_heads
        recurrent = heads * config.linear_key_head_dim * config.linear_value_head_dim * state_size
        conv = config.conv_dim * (config.linear_conv_kernel_dim - 1) * itemsize
        return (recurrent + conv) * len(config.gdn_layer_ids)
