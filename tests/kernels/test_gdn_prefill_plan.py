"""GPU tests: kernels/gdn/prefill_plan.py, the GDN prefill core planned once a step and run for each layer, against
ops.gdn_prefill (the unplanned launches, checked against the plain-torch oracle in test_gdn_cuda.py) and the oracle.

Three layers with their own weights and pools share one plan built from the first; packed rows of 70, 5 and 130
tokens continuing, starting fresh and continuing their slots (non-contiguous, unused slots NaN); the gates are
column views of one fused projection, as the worker hands them over; outputs NaN-poisoned first.
"""
import pytest
import torch

from kernels.gdn import naive
from tests.kernels.test_gdn_cuda import K, gates, layer, pool_with, rel

pytestmark = pytest.mark.gpu

H, HV, LENS, SLOTS, INIT = 2, 4, [70, 5, 130], [3, 0, 5], [1, 0, 1]


def _layer_inputs(num_tokens, seed):
    torch.manual_seed(seed)
    A_log, dt_bias, weight = layer(H, HV)
    channels = weight.shape[0]
    fused = torch.randn(num_tokens, channels + 2 * HV + 8, device="cuda").bfloat16()  # [mixed | b | a | pad]
    mixed, b, a = fused[:, :channels], fused[:, channels:channels + HV], fused[:, channels + HV:channels + 2 * HV]
    state = pool_with(SLOTS, 6, HV, torch.float32)
    conv = torch.randn(6, channels, 3, device="cuda")
    return mixed, a, b, weight.float().contiguous(), A_log, dt_bias, conv, state


def _rows():
    from kernels.gdn import ops

    cu = [0]
    for n in LENS:
        cu.append(cu[-1] + n)
    dev = lambda v: torch.tensor(v, dtype=torch.int32, device="cuda")  # noqa: E731
    return dev(SLOTS), dev(cu), dev(INIT), ops.prefill_tables(cu, "cuda"), cu[-1]


def _oracle(mixed, a, b, weight, A_log, dt_bias, conv, state, cu):
    """o [T, HV, V] f32 from naive.causal_conv1d + recurrent_gated_delta_rule on the slots' initial states."""
    init = torch.tensor(INIT, device="cuda", dtype=torch.bool)
    init_s = torch.where(init[:, None, None, None], state[SLOTS], 0.0)
    init_c = torch.where(init[:, None, None], conv[SLOTS], 0.0)
    y, _ = naive.causal_conv1d(mixed.float(), weight, init_c, cu)
    key = H * K
    q, k, v = (y[:, :key].unflatten(1, (H, K)), y[:, key:2 * key].unflatten(1, (H, K)),
               y[:, 2 * key:].unflatten(1, (HV, K)))
    g, beta = gates(a, b, A_log, dt_bias)
    return naive.recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=init_s, cu_seqlens=cu)[0]


def test_one_plan_serves_every_layer_as_the_unplanned_launches_do():
    from kernels.gdn import ops
    from kernels.gdn.prefill_plan import PrefillPlan

    slots, cu, has_init, tables, num_tokens = _rows()
    layers = [_layer_inputs(num_tokens, seed) for seed in range(3)]
    m, a, b, w, A_log, dt_bias, conv, state = layers[0]
    plan = PrefillPlan(m, a, b, w, A_log, dt_bias, conv, state, slots, cu, has_init, tables, H, K ** -0.5)
    for i, (m, a, b, w, A_log, dt_bias, conv, state) in enumerate(layers):
        ref_conv, ref_state = conv.clone(), state.clone()
        want = ops.gdn_prefill(m, a, b, w, A_log, dt_bias, ref_conv, ref_state, slots, cu, H,
                               has_initial_state=has_init, tables=tables)
        oracle = _oracle(m, a, b, w, A_log, dt_bias, conv, state, cu)
        out = torch.full((num_tokens, HV, K), float("nan"), device="cuda", dtype=torch.bfloat16) if i == 1 else None
        assert plan.matches(m, a, b, w, A_log, conv, state)
        got = plan.run(m, a, b, w, A_log, dt_bias, conv, state, out)
        assert out is None or got.data_ptr() == out.data_ptr()
        assert torch.equal(got, want), f"layer {i}: the plan's output differs from ops.gdn_prefill's"
        assert torch.equal(conv, ref_conv) and torch.equal(state[SLOTS], ref_state[SLOTS]), f"layer {i}: pools differ"
        assert rel(got.float(), oracle) < 1e-2
        assert torch.isnan(state[[1, 2, 4]]).all(), "a slot outside slot_ids was written"


def test_a_layer_of_another_layout_does_not_match_the_plan():
    from kernels.gdn.prefill_plan import PrefillPlan

    slots, cu, has_init, tables, num_tokens = _rows()
    m, a, b, w, A_log, dt_bias, conv, state = _layer_inputs(num_tokens, 7)
    plan = PrefillPlan(m, a, b, w, A_log, dt_bias, conv, state, slots, cu, has_init, tables, H, K ** -0.5)
    assert plan.matches(m, a, b, w, A_log, conv, state)
    assert not plan.matches(m, a, b, w, A_log, conv, state.bfloat16())
    assert not plan.matches(m[:-1], a[:-1], b[:-1], w, A_log, conv, state)
    assert not plan.matches(m.contiguous(), a, b, w, A_log, conv, state)  # another token stride
