"""Unit tests (CPU): each layer kind against its transformers counterpart, including bf16 rounding points."""
import pytest
import torch

from worker.layers.gdn import GatedDeltaNet, split_fused_qkvz
from worker.layers.linear import Linear
from worker.layers.norm import GatedRMSNorm, RMSNorm
from worker.layers.rope import RotaryEmbedding

transformers = pytest.importorskip("transformers")
qwen3_5 = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
qwen3_next = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")


def _randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def test_zero_centred_rmsnorm_is_bit_exact_in_bf16():
    weight, x = _randn(64, seed=1, dtype=torch.bfloat16) * 0.1, _randn(9, 64, seed=2, dtype=torch.bfloat16) * 3
    ref = qwen3_5.Qwen3_5RMSNorm(64, eps=1e-6).to(torch.bfloat16)
    ref.weight.data.copy_(weight)
    out = RMSNorm(weight, 1e-6)(x)
    assert out.dtype == torch.bfloat16 and torch.equal(out, ref(x))


def test_gated_rmsnorm_is_bit_exact_in_bf16():
    weight = 1 + 0.1 * _randn(32, seed=3, dtype=torch.bfloat16)
    x, z = _randn(12, 32, seed=4, dtype=torch.bfloat16), _randn(12, 32, seed=5, dtype=torch.bfloat16)
    ref = qwen3_5.Qwen3_5RMSNormGated(32, eps=1e-6).to(torch.bfloat16)
    ref.weight.data.copy_(weight)
    out = GatedRMSNorm(weight, 1e-6)(x, z)
    assert out.dtype == torch.bfloat16 and torch.equal(out, ref(x, z))


def test_partial_rope_matches_transformers_mrope_for_text():
    config = transformers.Qwen3_5TextConfig(
        hidden_size=64, num_attention_heads=2, head_dim=32, num_hidden_layers=1,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                         "mrope_section": [2, 1, 1], "mrope_interleaved": True})
    positions = torch.tensor([0, 1, 5, 77, 4000, 8191])
    q, k = _randn(1, 2, 6, 32, seed=6), _randn(1, 2, 6, 32, seed=7)
    cos_ref, sin_ref = qwen3_5.Qwen3_5TextRotaryEmbedding(config)(q, positions[None])
    q_ref, k_ref = qwen3_5.apply_rotary_pos_emb(q, k, cos_ref, sin_ref)
    rope = RotaryEmbedding(8, 1e7)
    cos, sin = rope.cos_sin(positions, torch.float32)
    torch.testing.assert_close(cos, cos_ref[0], atol=0, rtol=0)
    torch.testing.assert_close(RotaryEmbedding.apply(q[0].transpose(0, 1), cos, sin), q_ref[0].transpose(0, 1))
    torch.testing.assert_close(RotaryEmbedding.apply(k[0].transpose(0, 1), cos, sin), k_ref[0].transpose(0, 1))


def _next_config():
    return transformers.Qwen3NextConfig(
        hidden_size=64, num_hidden_layers=1, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, layer_types=["linear_attention"])


def test_qwen3_next_fused_gdn_layer_matches_transformers():
    ref = qwen3_next.Qwen3NextGatedDeltaNet(_next_config(), layer_idx=0).eval()
    gen = torch.Generator().manual_seed(8)
    with torch.no_grad():
        for param in ref.parameters():
            param.copy_(torch.randn(param.shape, generator=gen) * 0.2)
        ref.A_log.copy_(torch.rand(4, generator=gen).log())
    x = _randn(1, 70, 64, seed=9)
    split = split_fused_qkvz(ref.in_proj_qkvz.weight.data, ref.in_proj_ba.weight.data, 2, 16, 16, 4)
    layer = GatedDeltaNet({n: Linear(w) for n, w in split.items()}, ref.conv1d.weight.data.squeeze(1),
                          ref.dt_bias.data, ref.A_log.data, GatedRMSNorm(ref.norm.weight.data, 1e-6),
                          Linear(ref.out_proj.weight.data), num_k_heads=2, head_k_dim=16, head_v_dim=16)
    recurrent, conv = torch.zeros(3, 4, 16, 16), torch.zeros(3, 64 + 64, 3)
    with torch.no_grad():
        want = ref(x)[0]
        got = layer(x[0], torch.tensor([0, 70], dtype=torch.int32), torch.tensor([2]), recurrent, conv)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    assert recurrent[2].abs().sum() > 0 and recurrent[:2].abs().sum() == 0
    torch.testing.assert_close(conv[2], (x[0, -3:] @ split["in_proj_qkv"].t()).t())
