"""Worker process (GPU path): compiles a kernels/ .cu file once per process with CuPy's RawModule (NVRTC, sm_90).

CuPy is imported lazily so that kernels/ imports on machines with no CuPy and no GPU (CI is CPU-only).
"""
import functools
import os

OPTIONS = ("--gpu-architecture=sm_90", "--std=c++17")


@functools.lru_cache(maxsize=None)
def module(path: str):
    """path: a .cu file (its folder is on the include path) -> cupy.RawModule, compiled and cached per process."""
    import cupy

    with open(path, encoding="utf-8") as f:
        source = f.read()
    options = OPTIONS + ("-I" + os.path.dirname(os.path.abspath(path)),)
    return cupy.RawModule(code=source, options=options)


@functools.lru_cache(maxsize=None)
def kernel(path: str, name: str):
    """-> cupy.RawKernel `name` (an extern "C" symbol) of the .cu file at `path`."""
    return module(path).get_function(name)


@functools.lru_cache(maxsize=None)
def external_stream(handle: int):
    """A cupy stream object wrapping the raw CUDA stream `handle` (torch's current stream), cached per handle."""
    import cupy

    return cupy.cuda.ExternalStream(handle)
