"""Worker process: partial rotary position embedding (NeoX rotate-half on the leading rotary_dim dims)."""
import math

import torch


def _yarn(inv_freq: torch.Tensor, rotary_dim: int, theta: float, scaling: dict) -> tuple:
    """YaRN (arXiv 2309.00071; transformers modeling_rope_utils.py _compute_yarn_parameters): each frequency blended
    between itself (fast dims, beta_fast rotations) and itself / factor (slow dims, beta_slow) over a linear ramp of
    the dim index; cos and sin scaled by attention_factor (0.1 ln factor + 1, or the mscale ratio, unless given)."""
    original = scaling["original_max_position_embeddings"]
    factor = scaling["factor"]

    def mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention_factor = scaling.get("attention_factor")
    if attention_factor is None:
        m, m_all = scaling.get("mscale"), scaling.get("mscale_all_dim")
        attention_factor = mscale(factor, m) / mscale(factor, m_all) if m and m_all else mscale(factor)

    def correction_dim(rotations):
        return rotary_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dim(scaling.get("beta_fast") or 32), correction_dim(scaling.get("beta_slow") or 1)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rotary_dim - 1)
    ramp = ((torch.arange(rotary_dim // 2, dtype=torch.float32) - low) / ((high - low) or 0.001)).clamp(0, 1)
    keep = 1 - ramp
    return inv_freq / factor * (1 - keep) + inv_freq * keep, float(attention_factor)


class RotaryEmbedding(torch.nn.Module):
    """RoPE on dims [0, rotary_dim) of each head; the rest pass through (model-spec.md 1.6).

    inv_freq = theta^(-arange(0, rotary_dim, 2) / rotary_dim). For text the interleaved MRoPE of
    transformers `Qwen3_5TextRotaryEmbedding` has equal t/h/w positions and reduces exactly to this.
    rope_type "linear" divides inv_freq by scaling["factor"], "yarn" blends it (_yarn) and scales cos/sin, as
    transformers' ROPE_INIT_FUNCTIONS do; the loader refuses the other kinds (worker.config.ROPE_TYPES).
    """

    def __init__(self, rotary_dim: int, theta: float, rope_type: str = "default", scaling: dict = None):
        super().__init__()
        self.rotary_dim = rotary_dim
        exponent = torch.arange(0, rotary_dim, 2, dtype=torch.int64).float() / rotary_dim
        inv_freq, self.attention_factor = 1.0 / (theta ** exponent), 1.0
        if rope_type == "linear":
            inv_freq = inv_freq / scaling["factor"]
        elif rope_type == "yarn":
            inv_freq, self.attention_factor = _yarn(inv_freq, rotary_dim, theta, scaling)
        elif rope_type != "default":
            raise ValueError(f"rope_type {rope_type!r} is not built")
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype):
        """positions [T] int64 -> cos, sin [T, rotary_dim], computed in fp32 (times attention_factor) then cast."""
        freqs = positions.float()[:, None] * self.inv_freq.to(positions.device, non_blocking=True)[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        if self.attention_factor != 1.0:
            return (emb.cos() * self.attention_factor).to(dtype), (emb.sin() * self.attention_factor).to(dtype)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    @staticmethod
    def apply(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x [T, heads, hd]; cos, sin [T, rotary_dim] -> x rotated on its leading rotary_dim dims."""
        rot_dim = cos.shape[-1]
        x_rot, x_pass = x[..., :rot_dim], x[..., rot_dim:]
        half = rot_dim // 2
        rotated = torch.cat([-x_rot[..., half:], x_rot[..., :half]], dim=-1)
        x_rot = x_rot * cos[:, None, :] + rotated * sin[:, None, :]
        return torch.cat([x_rot, x_pass], dim=-1)
