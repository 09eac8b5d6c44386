"""Worker process (GPU path): compiles a kernels/ .cu file once per process with CuPy's RawModule (NVRTC, sm_90).

CuPy is imported lazily so that kernels/ imports on machines with no CuPy and no GPU (CI is CPU-only).
"""
import functools
import os

# CuPy appends the architecture itself (`-arch=sm_90` on an H200, from the device's compute capability; passing a
# second one is an error) and `-ftz=true` (f32 only: the kernels' bf16 math and MMA keep subnormals).
OPTIONS = ("--std=c++17",)


@functools.lru_cache(maxsize=None)
def module(path: str):
    """path: a .cu file (its folder is on the include path) -> cupy.RawModule, compiled once per process (CuPy
    also keeps the cubin in its on-disk cache)."""
    import cupy

    with open(path, encoding="utf-8") as f:
        source = f.read()
    options = OPTIONS + ("-I" + os.path.dirname(os.path.abspath(path)),)
    return cupy.RawModule(code=source, options=options)


@functools.lru_cache(maxsize=None)
def kernel(path: str, name: str):
    """-> cupy.RawKernel `name` (an extern "C" symbol) of the .cu file at `path`."""
    return module(path).get_function(name)


class RawStream:
    """What CuPy's kernel launch reads from a stream argument (`.ptr`): a raw CUDA stream handle, e.g. torch's."""
    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr


@functools.lru_cache(maxsize=None)
def external_stream(handle: int) -> RawStream:
    """The raw CUDA stream `handle` (torch's current stream) in the form CuPy's launch takes, cached per handle."""
    return RawStream(handle)


def current_stream() -> RawStream:
    """torch's current CUDA stream on the current device, as CuPy's launch takes it. Through torch's C hooks (the
    ones its own compiled kernels launch with) where this torch has them: torch.cuda.current_stream() resolves the
    device index in Python, its 674 calls in one 64-layer 512-token prefill step took 15 ms under cProfile (H200,
    2026-11-29)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        return external_stream(torch.cuda.current_stream().cuda_stream)
    return external_stream(raw(current_device()))


def current_device() -> int:
    """torch's current CUDA device index (through its C hook where this torch has it, as current_stream)."""
    import torch

    hook = getattr(torch._C, "_cuda_getDevice", None)
    return hook() if hook is not None else torch.cuda.current_device()


@functools.lru_cache(maxsize=None)
def capability(device) -> tuple:
    """(major, minor) compute capability of CUDA `device` (a torch.device or an index), cached."""
    import torch

    return torch.cuda.get_device_capability(device)


@functools.lru_cache(maxsize=None)
def num_sms(device) -> int:
    """Streaming multiprocessors of CUDA `device` (cached: the properties lookup costs a few microseconds)."""
    import torch

    return torch.cuda.get_device_properties(device).multi_processor_count
