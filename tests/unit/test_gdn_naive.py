"""Unit tests (CPU): the plain-torch Gated DeltaNet oracle agrees with itself (chunked vs recurrent) and transformers."""
import pytest
import torch
import torch.nn.functional as F

from kernels.gdn import naive

LENGTHS = [1, 63, 64, 65, 130]
H, HV, K, V = 2, 4, 32, 16


def _inputs(lengths, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    q = torch.randn(total, H, K, generator=gen).to(dtype)
    k = torch.randn(total, H, K, generator=gen).to(dtype)
    v = torch.randn(total, HV, V, generator=gen).to(dtype)
    g = -F.softplus(torch.randn(total, HV, generator=gen) - 1.0)
    beta = torch.rand(total, HV, generator=gen).to(dtype)
    state = torch.randn(len(lengths), HV, K, V, generator=gen)
    cu = torch.tensor([0] + lengths).cumsum(0).to(torch.int32)
    return q, k, v, g, beta, state, cu


def _rel(a, b):
    return ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()


@pytest.mark.parametrize("chunk_size", [64, 16], ids=["chunk64", "chunk16"])
def test_chunk_matches_recurrent_varlen_with_initial_state(chunk_size):
    q, k, v, g, beta, state, cu = _inputs(LENGTHS)
    o_rec, s_rec = naive.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=state, cu_seqlens=cu)
    o_chk, s_chk = naive.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=state, cu_seqlens=cu,
                                                chunk_size=chunk_size)
    assert o_chk.shape == (sum(LENGTHS), HV, V) and s_chk.shape == (len(LENGTHS), HV, K, V)
    assert s_chk.dtype == torch.float32
    torch.testing.assert_close(o_chk, o_rec, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(s_chk, s_rec, atol=1e-5, rtol=1e-4)
    assert not torch.equal(s_rec, state)


def test_recurrent_matches_transformers_per_sequence():
    modeling = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
    q, k, v, g, beta, state, cu = _inputs(LENGTHS, seed=1)
    o, s = naive.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=state, cu_seqlens=cu)
    for n in range(len(LENGTHS)):
        lo, hi = int(cu[n]), int(cu[n + 1])
        ref_o, ref_s = modeling.torch_recurrent_gated_delta_rule(
            q[None, lo:hi], k[None, lo:hi], v[None, lo:hi], g[None, lo:hi], beta[None, lo:hi],
            initial_state=state[n:n + 1], output_final_state=True, use_qk_l2norm_in_kernel=True)
        torch.testing.assert_close(o[lo:hi], ref_o[0], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(s[n], ref_s[0], atol=1e-6, rtol=1e-5)


def test_chunk_matches_transformers_chunked_form():
    modeling = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
    q, k, v, g, beta, state, _ = _inputs([130], seed=2)
    o, s = naive.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=state)
    ref_o, ref_s = modeling.torch_chunk_gated_delta_rule(
        q[None], k[None], v[None], g[None], beta[None], initial_state=state, output_final_state=True,
        use_qk_l2norm_in_kernel=True)
    torch.testing.assert_close(o, ref_o[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(s, ref_s, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("fn", [naive.recurrent_gated_delta_rule, naive.chunk_gated_delta_rule],
                         ids=["recurrent", "chunk"])
def test_state_carries_across_calls(fn):
    q, k, v, g, beta, state, _ = _inputs([100], seed=3)
    o_all, s_all = fn(q, k, v, g, beta, initial_state=state)
    o_a, s_a = fn(q[:37], k[:37], v[:37], g[:37], beta[:37], initial_state=state)
    o_b, s_b = fn(q[37:], k[37:], v[37:], g[37:], beta[37:], initial_state=s_a)
    torch.testing.assert_close(torch.cat([o_a, o_b]), o_all, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(s_b, s_all, atol=1e-5, rtol=1e-4)


def test_no_initial_state_means_zero_state_and_bf16_output_dtype():
    q, k, v, g, beta, state, cu = _inputs([5, 9], seed=4, dtype=torch.bfloat16)
    o_none, s_none = naive.chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=cu)
    o_zero, s_zero = naive.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=torch.zeros_like(state),
                                                      cu_seqlens=cu)
    assert o_none.dtype == torch.bfloat16 and s_none.dtype == torch.float32
    torch.testing.assert_close(o_none, o_zero, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(s_none, s_zero, atol=1e-4, rtol=1e-4)


def test_scale_argument_multiplies_queries():
    q, k, v, g, beta, state, _ = _inputs([8], seed=5)
    o_default, _ = naive.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=state)
    o_double, _ = naive.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=state, scale=2 * K ** -0.5)
    torch.testing.assert_close(o_double, 2 * o_default, atol=1e-5, rtol=1e-5)


def _conv_reference(x, weight, state):
    """Per-sequence F.conv1d over [state ; x] (channels first), then SiLU."""
    padded = torch.cat([state, x.t()], dim=1)[None]
    y = F.silu(F.conv1d(padded, weight[:, None, :], groups=weight.shape[0]))[0].t()
    return y, padded[0, :, -(weight.shape[1] - 1):]


@pytest.mark.parametrize("lengths", [[1, 2, 7, 64], [3]], ids=["mixed", "single"])
def test_causal_conv1d_matches_conv1d_with_state(lengths):
    gen = torch.Generator().manual_seed(6)
    channels, width = 24, 4
    x = torch.randn(sum(lengths), channels, generator=gen)
    weight = torch.randn(channels, width, generator=gen)
    state = torch.randn(len(lengths), channels, width - 1, generator=gen)
    cu = torch.tensor([0] + lengths).cumsum(0)
    y, new_state = naive.causal_conv1d(x, weight, state, cu)
    for n in range(len(lengths)):
        lo, hi = int(cu[n]), int(cu[n + 1])
        ref_y, ref_state = _conv_reference(x[lo:hi], weight, state[n])
        torch.testing.assert_close(y[lo:hi], ref_y, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(new_state[n], ref_state)


def test_causal_conv1d_fresh_sequence_matches_transformers_prefill():
    modeling = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(20, 12, generator=gen)
    weight = torch.randn(12, 4, generator=gen)
    y, new_state = naive.causal_conv1d(x, weight, None, None)
    ref = modeling.causal_conv1d_fn(x.t()[None], weight, None, activation="silu")[0].t()
    torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(new_state[0], x[-3:].t())
