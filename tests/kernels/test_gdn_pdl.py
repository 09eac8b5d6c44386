"""GPU tests: the recurrent decode launched with programmatic dependent launch (kernels/gdn/_decode.py DECODE_PDL)
gives exactly what the plain launch gives, right after the conv kernel that writes its q, k, v (gdn_decode), eagerly
and replayed from a CUDA graph over several steps with fresh inputs."""
import pytest
import torch

from kernels.gdn import _decode, ops
from tests.kernels.test_gdn_cuda import layer, tokens

pytestmark = pytest.mark.gpu


def _steps(state, conv, inputs, A_log, dt_bias, weight, slot_ids, pdl: bool, graph: bool):
    """gdn_decode over `inputs` [(x, a, b)] -> outputs; pools updated in place."""
    _decode.DECODE_PDL = pdl
    try:
        x0, a0, b0 = (t.clone() for t in inputs[0])
        run = lambda: ops.gdn_decode(x0, a0, b0, weight, A_log, dt_bias, conv, state, slot_ids, 2)  # noqa: E731
        if not graph:
            outs = []
            for x, a, b in inputs:
                x0.copy_(x), a0.copy_(a), b0.copy_(b)
                outs.append(run().clone())
            return outs
        s0, c0 = state.clone(), conv.clone()
        run()  # compile outside the capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            o = run()
        state.copy_(s0), conv.copy_(c0)
        outs = []
        for x, a, b in inputs:
            x0.copy_(x), a0.copy_(a), b0.copy_(b)
            o.fill_(float("nan"))
            g.replay()
            outs.append(o.clone())
        return outs
    finally:
        _decode.DECODE_PDL = True


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("num_seqs", [3, 32])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
def test_pdl_decode_equals_plain_launch(graph, num_seqs, dtype):
    # the default kernels: bf16 t128x6 (3) / tma3x2a (32); f32 regs (3) / the TMA ring tma3x1 (32)
    A_log, dt_bias, weight = layer(2, 6)
    channels = weight.shape[0]
    slots = torch.randperm(3 * num_seqs)[:num_seqs].tolist()
    state0 = (torch.randn(3 * num_seqs, 6, 128, 128, device="cuda") * 0.3).to(dtype)
    conv0 = torch.randn(3 * num_seqs, channels, 3, device="cuda").bfloat16()
    slot_ids = torch.tensor(slots, dtype=torch.int32, device="cuda")
    inputs = []
    for _ in range(3):
        _, _, _, a, b = tokens(num_seqs, 2, 6)
        inputs.append((torch.randn(num_seqs, channels, device="cuda").bfloat16(), a, b))
    results = []
    for pdl in (False, True):
        state, conv = state0.clone(), conv0.clone()
        outs = _steps(state, conv, inputs, A_log, dt_bias, weight, slot_ids, pdl, graph and pdl)
        results.append((outs, state, conv))
    (plain, s_plain, c_plain), (pdl, s_pdl, c_pdl) = results
    for o_plain, o_pdl in zip(plain, pdl):
        assert torch.isfinite(o_pdl.float()).all() and torch.equal(o_pdl, o_plain)
    assert torch.equal(s_pdl, s_plain) and torch.equal(c_pdl, c_plain)
