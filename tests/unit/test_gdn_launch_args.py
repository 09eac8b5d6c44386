"""CPU tests: the GDN prefill launches' argument builders (kernels/gdn/_launch.py conv_prefill_args, chunk_prep_args,
chunk_state_args) and the indices kernels/gdn/prefill_plan.PrefillPlan.run rewrites for each layer (CONV_MIXED ...
STATE_OUT). A wrong index would make every GDN layer after the first read the first layer's tensors on the GPU;
here each index must hold the address of the tensor it names and no other argument may hold that address."""
import torch

from kernels.gdn import _launch

T, H, HV, K = 5, 2, 4, 128  # tokens, key heads, value heads, head dim


def _t(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape).to(dtype)


def _addresses(args) -> list:
    return [int(a) for a in args]


def _assert_named(args, named: dict) -> None:
    values = _addresses(args)
    for index, tensor in named.items():
        assert values[index] == tensor.data_ptr(), index
        assert values.count(tensor.data_ptr()) == 1, index


def test_conv_prefill_args_indices_name_the_layer_tensors():
    channels = (2 * H + HV) * K
    x, w, pool, y = _t(T, channels), _t(channels, 4, dtype=torch.float32), _t(3, channels, 3), _t(T, channels)
    rows = [torch.arange(n, dtype=torch.int32) + 7 for n in (2, 4, 3, 2)]
    args = _launch.conv_prefill_args(x, w, pool, *rows, y)
    _assert_named(args, {_launch.CONV_MIXED: x, _launch.CONV_WEIGHT: w, _launch.CONV_POOL: pool})
    assert int(args[1]) == channels and int(args[4]) == pool.stride(0) and int(args[-1]) == channels


def test_chunk_args_indices_name_the_layer_tensors():
    y = _t(T, (2 * H + HV) * K)
    q, k, v = y[:, :H * K], y[:, H * K:2 * H * K], y[:, 2 * H * K:]
    a, b, a_log, dt_bias = _t(T, HV), _t(T, HV), _t(HV, dtype=torch.float32), _t(HV, dtype=torch.float32)
    pool, o = _t(3, HV, K, K, dtype=torch.float32), _t(T, HV, K)
    ws = dict(_launch.workspace(T, H, HV, 1, "cpu"), o=o)
    chunks, seq_chunks, slots, has_init = (torch.zeros(n, dtype=torch.int32) for n in (4, 2, 1, 1))
    prep = _launch.chunk_prep_args(ws, q, k, a, b, a_log, dt_bias, 0.125, chunks)
    _assert_named(prep, {_launch.PREP_A: a, _launch.PREP_B: b, _launch.PREP_A_LOG: a_log,
                         _launch.PREP_DT_BIAS: dt_bias})
    assert int(prep[0]) == y.data_ptr() and int(prep[1]) == y.data_ptr() + H * K * 2
    state = _launch.chunk_state_args(ws, v, pool, slots, has_init, chunks, seq_chunks)
    _assert_named(state, {_launch.STATE_POOL: pool, _launch.STATE_OUT: o})
    assert int(state[2]) == y.data_ptr() + 2 * H * K * 2 and int(state[3]) == y.stride(0)


def test_workspace_shapes():
    ws = _launch.workspace(T, H, HV, 3, "cpu")
    assert ws["qn"].shape == ws["kn"].shape == (T, H, K) and ws["qn"].dtype == torch.float16
    assert ws["gc"].shape == ws["beta"].shape == (T, HV) and ws["gc"].dtype == torch.float32
    assert ws["tmat"].shape == ws["pmat"].shape == (3, HV, 64, 64) and (ws["H"], ws["HV"]) == (H, HV)
