"""Worker process: partial rotary position embedding (NeoX rotate-half on the leading rotary_dim dims)."""
import torch


class RotaryEmbedding(torch.nn.Module):
    """RoPE on dims [0, rotary_dim) of each head; the rest pass through (model-spec.md 1.6).

    inv_freq = theta^(-arange(0, rotary_dim, 2) / rotary_dim). For text the interleaved MRoPE of
    transformers `Qwen3_5TextRotaryEmbedding` has equal t/h/w positions and reduces exactly to this.
    """

    def __init__(self, rotary_dim: int, theta: float):
        super().__init__()
        self.rotary_dim = rotary_dim
        exponent = torch.arange(0, rotary_dim, 2, dtype=torch.int64).float() / rotary_dim
        self.register_buffer("inv_freq", 1.0 / (theta ** exponent), persistent=False)

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype):
        """positions [T] int64 -> cos, sin [T, rotary_dim], computed in fp32 then cast to `dtype`."""
        freqs = positions.float()[:, None] * self.inv_freq.to(positions.device, non_blocking=True)[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
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
