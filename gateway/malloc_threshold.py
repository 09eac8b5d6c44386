"""Gateway process: glibc malloc's mmap threshold held at its default, so a big request's memory goes back to the OS."""
from __future__ import annotations

import ctypes

# mallopt(3)'s parameter number for M_MMAP_THRESHOLD (malloc.h), and glibc's default threshold.
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 128 * 1024


def fix_mmap_threshold() -> bool:
    """Sets M_MMAP_THRESHOLD to glibc's default, which turns its dynamic threshold off; False where the C library
    has no mallopt (macOS) or refuses it (musl).

    glibc raises the threshold to the size of each mmapped block freed, up to 32 MiB (mallopt(3), "M_MMAP_THRESHOLD"),
    and its trim threshold to twice that: after one big body (a 28 MiB prompt, its JSON text, its token list) every
    later block up to that size came from the heap, where the small blocks that outlive a request (a log record, a
    cached entry) keep the freed space between them from going back. Eight 28 MiB prompts left the gateway at 625-680
    MB RSS with nothing live (malloc_trim took it to 188 MB); with the threshold fixed, such blocks are mmapped and
    unmapped when freed, and it stays at 190-250 MB. Setting the parameter is what mallopt(3) says disables the
    dynamic adjustment.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
