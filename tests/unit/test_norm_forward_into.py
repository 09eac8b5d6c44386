"""RMSNorm.forward_into and Linear.stash (CPU): the protocol that lets a decoder layer's residual add + RMSNorm ride in
the next projection's GEMV on a GPU. Here a Linear stands in whose fused call is scripted; the kernel itself is
tested on the GPU (tests/kernels/test_nvfp4_bt.py)."""
import torch

from worker.layers import norm as norm_layer
from worker.layers.linear import Linear


def _norm() -> norm_layer.RMSNorm:
    return norm_layer.RMSNorm(torch.randn(8) * 0.1, 1e-6)


class _FusedLinear(Linear):
    """A Linear whose forward_rms_norm answers like the GPU kernel would (out, y, h), computed in torch."""

    def __init__(self, weight, norm):
        super().__init__(weight)
        self.norm, self.fused_calls = norm, 0

    def forward_rms_norm(self, x, residual, norm_weight, eps):
        self.fused_calls += 1
        assert norm_weight is self.norm.weight and eps == self.norm.eps
        y, h = self.norm(x, residual)
        return torch.nn.functional.linear(y, self.weight) + 1000.0, y, h  # + 1000: shows the stashed value


def test_forward_into_stashes_the_fused_output_for_the_next_call(monkeypatch):
    monkeypatch.setattr(norm_layer, "USE_KERNELS", True)
    norm = _norm()
    lin = _FusedLinear(torch.randn(4, 8), norm)
    x, res = torch.randn(1, 8), torch.randn(1, 8)
    y, h = norm.forward_into(x, res, lin)
    want_y, want_h = norm(x, res)
    assert torch.equal(y, want_y) and torch.equal(h, want_h) and lin.fused_calls == 1
    plain = torch.nn.functional.linear(y, lin.weight)
    assert torch.equal(lin(y), plain + 1000.0)  # the stashed output, once
    assert torch.equal(lin(y), plain)  # then computed again
    norm.forward_into(x, res, lin)
    assert torch.equal(lin(y.clone()), plain)  # another tensor with the same values: computed, stash dropped
    assert torch.equal(lin(y), plain)


def test_forward_into_without_a_fused_kernel_is_forward(monkeypatch):
    monkeypatch.setattr(norm_layer, "USE_KERNELS", True)
    norm = _norm()
    lin = Linear(torch.randn(4, 8))  # dense: forward_rms_norm answers None
    x, res = torch.randn(1, 8), torch.randn(1, 8)
    for linear in (lin, None):
        y, h = norm.forward_into(x, res, linear)
        want_y, want_h = norm(x, res)
        assert torch.equal(y, want_y) and torch.equal(h, want_h)
    assert torch.equal(lin(y), torch.nn.functional.linear(y, lin.weight))
    fused = _FusedLinear(torch.randn(4, 8), norm)
    monkeypatch.setattr(norm_layer, "USE_KERNELS", False)
    norm.forward_into(x, res, fused)
    assert fused.fused_calls == 0


def test_decoder_layers_name_their_input_linear():
    from worker.layers.mlp import MLP

    gate, up, down = Linear(torch.randn(6, 8)), Linear(torch.randn(6, 8)), Linear(torch.randn(8, 6))
    mlp = MLP(gate, up, down)
    assert mlp.input_linear is gate
    assert mlp.fuse_projections() and mlp.input_linear is mlp.gate_up_proj.linears[0]
