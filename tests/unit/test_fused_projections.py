"""Projections that read one input fuse per run of same-kind weights (worker/layers/fused.py), also where a
checkpoint mixes NVFP4 and bf16 inside a layer (the GDN gates in_proj_b / in_proj_a stay bf16 in NVFP4 recipes)."""
import copy

import pytest
import torch

from kernels.nvfp4 import checkpoint, quantize
from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.layers.fused import FusedProjections, fuse
from worker.layers.gdn import GatedDeltaNet
from worker.layers.linear import Linear
from worker.loader import load_model
from worker.tiny import write_tiny_checkpoint


def _nvfp4(rows: int, gmul: float, gen) -> Linear:
    packed = torch.randint(0, 256, (rows, 64), dtype=torch.uint8, generator=gen)
    scale = (torch.rand(rows, 8, generator=gen) + 0.5).to(torch.float8_e4m3fn)
    return Linear(checkpoint.NVFP4Weight(packed, scale, torch.tensor(gmul)))


def test_runs_of_same_kind_fuse_and_outputs_equal_the_separate_linears():
    gen = torch.Generator().manual_seed(7)
    parts = [_nvfp4(64, 0.01, gen), _nvfp4(32, 0.3, gen), Linear(torch.randn(16, 128, generator=gen)),
             Linear(torch.randn(8, 128, generator=gen)), _nvfp4(16, 2.0, gen)]
    fused = FusedProjections(parts)
    assert fused.num_launches == 3
    assert [lin.nvfp4 is not None for lin in fused.linears] == [True, False, True]
    assert [lin.out_features for lin in fused.linears] == [96, 24, 16]
    x = torch.randn(5, 128, generator=gen)
    got = fused(x)
    assert len(got) == len(parts)
    for out, part in zip(got, parts):
        torch.testing.assert_close(out, part(x))


def test_outputs_written_into_static_buffers_equal_the_returned_ones():
    """FusedProjections(x, outs) (the piecewise prefill graphs' static buffers, worker/prefill_graphs.py) writes each
    run's output into its buffer and returns views of it, equal to the plain call; a buffer of another shape is a
    ValueError."""
    gen = torch.Generator().manual_seed(9)
    fused = FusedProjections([_nvfp4(64, 0.01, gen), _nvfp4(32, 0.3, gen), Linear(torch.randn(16, 128, generator=gen)),
                              Linear(torch.randn(8, 128, generator=gen))])
    assert fused.widths == [96, 24]
    x = torch.randn(5, 128, generator=gen)
    outs = [torch.full((5, w), float("nan")) for w in fused.widths]
    got = fused(x, outs)
    for g, want in zip(got, fused(x)):
        torch.testing.assert_close(g, want)
    assert got[0].data_ptr() == outs[0].data_ptr() and got[2].data_ptr() == outs[1].data_ptr()
    assert not any(o.isnan().any() for o in outs)
    with pytest.raises(ValueError, match="out must be"):
        fused(x, [torch.empty(4, 96), outs[1]])


def test_fuse_refuses_when_no_launch_is_saved():
    gen = torch.Generator().manual_seed(8)
    assert fuse([_nvfp4(16, 1.0, gen), Linear(torch.randn(16, 128, generator=gen))]) is None
    assert fuse([_nvfp4(16, 1.0, gen)]) is None
    assert fuse([_nvfp4(16, 1.0, gen), _nvfp4(16, 0.5, gen)]).num_launches == 1


def test_nvfp4_model_with_bf16_gdn_gates_fuses_every_layer_and_keeps_its_logits(tmp_path):
    bf16, out = str(tmp_path / "bf16"), str(tmp_path / "nvfp4")
    write_tiny_checkpoint(bf16)
    quantize.quantize_folder(bf16, out, "modelopt", lm_head=False, progress=False)
    model, config = load_model(out, dtype=torch.float32, progress=False)
    gdn = next(layer.mixer for layer in model.layers if isinstance(layer.mixer, GatedDeltaNet))
    assert gdn.in_proj_qkv.nvfp4 is not None and gdn.in_proj_b.nvfp4 is None  # the recipe's mix
    fused = copy.deepcopy(model)
    assert fused.fuse_projections() == config.num_hidden_layers
    for layer in fused.layers:
        if isinstance(layer.mixer, GatedDeltaNet):
            assert layer.mixer.in_proj_all.num_launches == 2  # [qkv; z] NVFP4, [b; a] bf16
    ids = torch.randint(3, config.vocab_size, (29,), generator=torch.Generator().manual_seed(2)).tolist()
    batch = ForwardBatch.from_rows([(ids, 0, 1, [2, 0], True), ([5], 0, 0, [3], True)], 16)
    with torch.no_grad():
        want = model(batch, ModelCache(config, 4, 16, 2, dtype=torch.float32), all_logits=True)
        got = fused(batch, ModelCache(config, 4, 16, 2, dtype=torch.float32), all_logits=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
