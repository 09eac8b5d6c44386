"""ops._launch, the one place the NVFP4 GEMVs choose a programmatic dependent launch (kernels/_pdl.py) or CuPy's plain
launch, on CPU with the driver and CuPy replaced by recorders: PDL only when the caller allows it, ops.PDL is on and
the current GPU is a Hopper."""
import pytest

from kernels import _compile
from kernels.nvfp4 import ops


class _Kernel:
    def __init__(self):
        self.calls = []

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        self.calls.append((grid, block, args, shared_mem, stream.ptr))


@pytest.fixture
def launches(monkeypatch):
    pdl_calls = []
    monkeypatch.setattr(ops._pdl, "launch", lambda *a: pdl_calls.append(a))
    monkeypatch.setattr(_compile, "current_stream", lambda: _compile.RawStream(1234))
    monkeypatch.setattr(_compile, "current_device", lambda: 0)
    return pdl_calls


@pytest.mark.parametrize("allowed,on,hopper,want_pdl", [(True, True, True, True), (False, True, True, False),
                                                        (True, False, True, False), (True, True, False, False)])
def test_pdl_only_when_allowed_on_and_hopper(monkeypatch, launches, allowed, on, hopper, want_pdl):
    monkeypatch.setattr(ops, "PDL", on)
    monkeypatch.setattr(ops, "_hopper", lambda device: hopper and device == 0)
    kernel = _Kernel()
    ops._launch("", "", (3,), (256,), ("a",), kernel, 512, allowed)
    if want_pdl:
        assert launches == [(kernel, (3,), (256,), ("a",), 512, 1234)] and kernel.calls == []
    else:
        assert launches == [] and kernel.calls == [((3,), (256,), ("a",), 512, 1234)]
