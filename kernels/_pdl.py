"""Worker process (GPU path): programmatic dependent launch (PDL, sm_90) of a CuPy kernel through the CUDA driver's
cuLaunchKernelEx (ctypes; CuPy's launch takes no launch attributes).

A kernel launched with the attribute CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION may start while the
kernel before it on the stream is still running: as soon as every block of that kernel has executed
`griddepcontrol.launch_dependents` (or exited) and SM resources free up. It must execute `griddepcontrol.wait`
(which returns once the preceding grid has completed and its writes are visible) in every block before it reads
anything the preceding kernels write and before any global write of its own; what it reads before (its weights)
must be written by no kernel on the stream. CUDA Programming Guide, "Programmatic Dependent Launch and
Synchronization"; PTX ISA, griddepcontrol. Stream capture records the dependency as a programmatic graph edge.
"""
import ctypes
import functools

from kernels import _compile

ATTR_PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CUlaunchAttributeID


class _Attr(ctypes.Structure):
    """CUlaunchAttribute: id, 4 bytes of padding, a 64-byte value union."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int * 16)]


class _Config(ctypes.Structure):
    """CUlaunchConfig (cuda.h)."""
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_mem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(_Attr)), ("num_attrs", ctypes.c_uint)]


@functools.lru_cache(maxsize=None)
def _driver():
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuLaunchKernelEx.argtypes = [ctypes.POINTER(_Config), ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                     ctypes.c_void_p]
    lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    return lib


def _c_arg(a):
    """A kernel argument (numpy scalar, as ops.py builds them) -> the ctypes value whose bytes the kernel reads.
    numpy is imported here, not with the module: kernels.gdn.ops imports without numpy or CuPy."""
    import numpy as np

    if isinstance(a, np.uint64):
        return ctypes.c_uint64(int(a))
    if isinstance(a, np.int32):
        return ctypes.c_int32(int(a))
    if isinstance(a, np.int64):
        return ctypes.c_int64(int(a))
    if isinstance(a, np.float32):
        return ctypes.c_float(float(a))
    raise TypeError(f"PDL launch: unsupported kernel argument type {type(a).__name__}")


def launch(kernel, grid: tuple, block: tuple, args: tuple, shared_mem: int, stream_ptr: int) -> None:
    """Launch cupy RawKernel `kernel` with the programmatic-serialization attribute on the raw CUDA stream
    `stream_ptr`. grid, block: up to 3 ints; args: numpy uint64 / int32 / int64 / float32 scalars in the kernel's order.
    Raises TypeError for another argument type and RuntimeError with the driver's error name if the launch fails."""
    cargs = [_c_arg(a) for a in args]
    params = (ctypes.c_void_p * len(cargs))(*[ctypes.cast(ctypes.pointer(c), ctypes.c_void_p) for c in cargs])
    attr = _Attr(id=ATTR_PROGRAMMATIC_STREAM_SERIALIZATION)
    attr.value[0] = 1
    g, b = (tuple(grid) + (1, 1))[:3], (tuple(block) + (1, 1))[:3]
    cfg = _Config((ctypes.c_uint * 3)(*g), (ctypes.c_uint * 3)(*b), shared_mem, ctypes.c_void_p(stream_ptr),
                  ctypes.pointer(attr), 1)
    lib = _driver()
    err = lib.cuLaunchKernelEx(ctypes.byref(cfg), ctypes.c_void_p(kernel.kernel.ptr), params, None)
    if err:
        _raise(err)


def _raise(err: int) -> None:
    """RuntimeError naming the driver's error `err` (a failed cuLaunchKernelEx)."""
    name = ctypes.c_char_p()
    _driver().cuGetErrorName(err, ctypes.byref(name))
    raise RuntimeError(f"cuLaunchKernelEx failed: {(name.value or b'?').decode()} ({err})")


class PreparedLaunch:
    """One kernel launch whose arguments are held as ctypes values, for a launch repeated with a few of them changed
    (a step plan's per-layer addresses): about 100 us of host time went to building a launch's arguments and its
    checks a layer (session 27, run 8). kernel, grid, block, args (numpy scalars), shared_mem as launch(); pdl: with
    the programmatic-serialization attribute (the kernel must griddepcontrol.wait, as for launch()), else a plain
    launch (cuLaunchKernelEx without attributes). set() changes one argument; launch() issues it on torch's current
    stream. Raises as launch()."""

    def __init__(self, kernel, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0, pdl: bool = True):
        self.kernel, self.values = kernel, [_c_arg(a) for a in args]
        self.params = (ctypes.c_void_p * len(self.values))(
            *[ctypes.cast(ctypes.pointer(c), ctypes.c_void_p) for c in self.values])
        self.attr = _Attr(id=ATTR_PROGRAMMATIC_STREAM_SERIALIZATION)
        self.attr.value[0] = 1
        g, b = (tuple(grid) + (1, 1))[:3], (tuple(block) + (1, 1))[:3]
        self.cfg = _Config((ctypes.c_uint * 3)(*g), (ctypes.c_uint * 3)(*b), shared_mem, None,
                           ctypes.pointer(self.attr) if pdl else None, 1 if pdl else 0)
        self.fn = ctypes.c_void_p(kernel.kernel.ptr)

    def set(self, index: int, value) -> None:
        """Argument `index` becomes `value` (an int address or count, a float), in the type it was made with."""
        self.values[index].value = value

    def launch(self) -> None:
        self.cfg.stream = _compile.current_stream().ptr
        err = _driver().cuLaunchKernelEx(ctypes.byref(self.cfg), self.fn, self.params, None)
        if err:
            _raise(err)


def supported() -> bool:
    """Whether torch's current CUDA device takes programmatic dependent launch (sm_90 or newer)."""
    return _compile.capability(_compile.current_device())[0] >= 9


def launch_on_stream(kernel, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0, pdl: bool = True) -> None:
    """Launch cupy RawKernel `kernel` on torch's current CUDA stream: through launch() when `pdl` (the caller has
    checked the device, e.g. supported(); the kernel must wait with griddepcontrol.wait before it reads what the
    kernels before it write), else a plain CuPy launch. Raises as launch()."""
    stream = _compile.current_stream()
    if pdl:
        launch(kernel, grid, block, args, shared_mem, stream.ptr)
    else:
        kernel(grid, block, args, shared_mem=shared_mem, stream=stream)
