"""Worker process: projections that read the same input, run as one Linear per run of same-kind weights.

On the GPU each Linear is one launch (an NVFP4 GEMV / GEMM, or cuBLAS for dense weights): at decode every launch
costs its tail, so rows that can share a launch should. Checkpoints mix kinds inside one layer: NVFP4 recipes
keep the GDN gates in_proj_b / in_proj_a in bf16 while in_proj_qkv / in_proj_z are 4-bit, so fusing all four or
none (the first version) left a served 27B-shaped GDN layer with four launches: 48 extra NVFP4 GEMVs and 96 cuBLAS
calls (each a split-K GEMM plus its reduce) per decode step, 1.07 ms of 8.9 ms (H200, bench/serve_profile.py,
2026-11-30). Runs of consecutive same-kind weights fuse instead: [qkv; z] and [b; a], two launches.
"""
import torch

from kernels.nvfp4.checkpoint import NVFP4Weight, concat_rows
from worker.layers.linear import Linear


def fuse_linears(linears) -> "Linear | None":
    """One Linear over the concatenated rows of `linears` (same in_features), so that one launch serves them:
    NVFP4 weights through kernels.nvfp4.checkpoint.concat_rows (each shard keeps its global scale), dense ones
    through torch.cat. None when the weights are of mixed kinds."""
    weights = [lin.nvfp4 if lin.nvfp4 is not None else lin.weight for lin in linears]
    if all(isinstance(w, NVFP4Weight) for w in weights):
        return Linear(concat_rows(weights))
    if any(isinstance(w, NVFP4Weight) for w in weights):
        return None
    return Linear(torch.cat([w.detach() for w in weights], dim=0))


def _runs(linears) -> list:
    """`linears` cut into runs of consecutive same-kind weights (NVFP4 or dense), order kept."""
    runs = []
    for lin in linears:
        if runs and (runs[-1][-1].nvfp4 is None) == (lin.nvfp4 is None):
            runs[-1].append(lin)
        else:
            runs.append([lin])
    return runs


class FusedProjections(torch.nn.Module):
    """Linears over one input x [T, D] -> the tuple of their outputs [T, out_i] (column views of a run's output).

    Each run of consecutive same-kind weights becomes one Linear (fuse_linears); `num_launches` is the number of
    runs. Outputs equal the separate Linears' (NVFP4 shards keep their global scales; tests/unit/
    test_fused_projections.py)."""

    def __init__(self, linears):
        super().__init__()
        runs = _runs(linears)
        self.linears = torch.nn.ModuleList(run[0] if len(run) == 1 else fuse_linears(run) for run in runs)
        self.sizes = [[lin.out_features for lin in run] for run in runs]

    @property
    def num_launches(self) -> int:
        """GEMV launches the fused projections take a forward (one per Linear kept)."""
        return len(self.linears)

    @property
    def widths(self) -> list:
        """Output width of each launch (run): what `outs` of forward holds, in order."""
        return [sum(sizes) for sizes in self.sizes]

    def forward(self, x: torch.Tensor, outs=None) -> tuple:
        """x [T, D] -> the Linears' outputs in order. outs: one [T, widths[i]] buffer per run to write into."""
        outputs = []
        for i, (linear, sizes) in enumerate(zip(self.linears, self.sizes)):
            y = linear(x) if outs is None else linear(x, out=outs[i])
            outputs.extend(torch.split(y, sizes, dim=-1) if len(sizes) > 1 else (y,))
        return tuple(outputs)


def fuse(linears) -> "FusedProjections | None":
    """FusedProjections of `linears` when that saves at least one launch, else None."""
    fused = FusedProjections(linears)
    return fused if fused.num_launches < len(linears) else None
