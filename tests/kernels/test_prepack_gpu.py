"""GPU test: the worker repacks its NVFP4 weights at load and frees the checkpoint layout (worker/server.py
build_runner -> worker/layers/linear.prepack_nvfp4): every NVFP4 Linear of the quantized tiny model is released and
gives exactly what the same Linear of a plain load gives, at GEMV (1 row) and GEMM (40 rows) sizes."""
import pytest
import torch

from kernels.nvfp4.quantize import quantize_folder
from worker.layers.linear import Linear
from worker.loader import load_model
from worker.server import WorkerConfig, build_runner

pytestmark = pytest.mark.gpu


def test_worker_frees_the_checkpoint_layout_and_keeps_its_outputs(tmp_path, tiny_path):
    # tiny_path (tests/kernels/conftest.py): models/tiny, or a copy written here where `make model` has not run
    path = str(tmp_path / "nvfp4")
    quantize_folder(tiny_path, path, "modelopt", lm_head=True, device="cuda", progress=False)
    runner, _ = build_runner(WorkerConfig(model=path, device="cuda:0", num_kv_blocks=32, num_state_slots=4))
    ref_model, _ = load_model(path, device=torch.device("cuda:0"), dtype=torch.bfloat16, progress=False)
    refs = dict(ref_model.named_modules())
    released = 0
    for name, module in runner.model.named_modules():
        if not isinstance(module, Linear) or module.nvfp4 is None:
            continue
        assert module.nvfp4.released, name
        released += 1
        for rows in (1, 40):
            x = torch.randn(rows, module.in_features, device="cuda").to(torch.bfloat16)
            assert torch.equal(module(x), refs[name](x)), (name, rows)
    assert released > 0
    with pytest.raises(RuntimeError, match="released"):
        next(m.nvfp4 for m in runner.model.modules() if isinstance(m, Linear) and m.nvfp4 is not None).dequantize()
