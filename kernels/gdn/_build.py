"""Worker process (GPU path): compile-once loader for the Gated DeltaNet CUDA sources (CuPy RawModule, sm_90).

Imports nothing GPU-related at module import time, so `kernels.gdn` imports on a CPU-only machine.
The shared `kernels._compile` helper did not exist when this was written; this compiles with NVRTC
(`-arch=sm_90 -std=c++17`, `-I` this folder for gdn_common.cuh), one module per (source, defines), cached
for the process (and on disk by CuPy).
"""
import functools
import os
import re

from kernels import _compile

SRC_DIR = os.path.dirname(os.path.abspath(__file__))
_OPTIONS = ("-arch=sm_90", "-std=c++17", f"-I{SRC_DIR}")


def _read(name: str) -> str:
    with open(os.path.join(SRC_DIR, name), encoding="utf-8") as fh:
        return fh.read()


def source(name: str) -> str:
    """Text of `kernels/gdn/<name>` with each header of this folder it includes (gdn_common.cuh,
    recurrent_common.cuh, recurrent_tma_loop.cuh) pasted in place of its #include, so that CuPy's on-disk cache (keyed by the source text)
    sees header edits too."""
    text = _read(name)
    for header in re.findall(r'#include "([\w.]+\.cuh)"', text):
        text = text.replace(f'#include "{header}"', _read(header).replace("#pragma once", ""))
    return text


@functools.lru_cache(maxsize=None)
def module(name: str, defines: tuple = ()):
    """cupy.RawModule for source `name` compiled with `-D` `defines` (tuple of "KEY=VALUE"), cached."""
    import cupy

    options = _OPTIONS + tuple(f"-D{d}" for d in defines)
    try:
        mod = cupy.RawModule(code=source(name), options=options)
        mod.compile()
    except cupy.cuda.compiler.CompileException:
        # some CuPy versions add their own -arch for the current device (sm_90 on H100/H200): use theirs
        mod = cupy.RawModule(code=source(name), options=options[1:])
        mod.compile()
    return mod


@functools.lru_cache(maxsize=None)
def kernel(name: str, func: str, defines: tuple = (), dyn_smem: int = 0, carveout: int = -1):
    """The `func` entry of module(name, defines); raises its dynamic shared-memory limit to `dyn_smem` bytes;
    carveout >= 0: preferred shared-memory share of L1 in percent (a hint; 100 = as much shared as possible)."""
    fn = module(name, defines).get_function(func)
    if dyn_smem > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = dyn_smem
    if carveout >= 0:
        try:
            fn.preferred_shared_memory_carveout = carveout
        except Exception:  # noqa: BLE001 - only a hint; older CuPy lacks the attribute
            pass
    return fn


def launch(fn, grid, block, args, shared_mem: int = 0):
    """Launch `fn` on torch's current CUDA stream. args: ints/floats already wrapped as numpy scalars."""
    fn(grid, block, args, shared_mem=shared_mem, stream=_compile.current_stream())
