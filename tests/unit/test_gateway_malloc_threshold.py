"""Gateway: glibc's dynamic mmap threshold is off, so the memory of a big request goes back to the OS once freed."""
import os
import platform
import subprocess
import sys

import pytest

import gateway.app

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# After one freed 30 MiB block (glibc then serves blocks up to 30 MiB from the heap), 200 MiB of 1 MiB blocks, each
# followed by a small block that outlives it (as log records and cache entries outlive a request): the MiB still
# resident once the big blocks are freed.
_HEAP_PATTERN = """
import sys
from gateway.malloc_threshold import fix_mmap_threshold
if sys.argv[1] == "fixed":
    assert fix_mmap_threshold()
def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 >> 20
big = b"x" * (30 << 20)
del big
base = rss_mib()
blocks, survivors = [], []
for _ in range(200):
    blocks.append(b"x" * (1 << 20))
    survivors.append(b"y" * 4096)
del blocks
print(rss_mib() - base)
"""


def _resident_after_free(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _HEAP_PATTERN, mode], cwd=REPO, capture_output=True, text=True,
                         timeout=60, check=True)
    return int(out.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or not os.path.exists("/proc/self/statm"),
                    reason="glibc's malloc on Linux")
def test_freed_big_blocks_go_back_to_the_os_with_the_threshold_fixed():
    """mallopt(3): a freed mmapped block raises glibc's threshold to its size; setting M_MMAP_THRESHOLD stops it."""
    resident = _resident_after_free("dynamic")
    if resident < 150:
        # 200 of 200 MiB stay when this file runs alone, after tests/unit alone or after tests/e2e alone; in the whole
        # suite (two fresh-clone CI runs, 2026-12-01) the same child process read 20: cause not found.
        pytest.skip(f"glibc returned the blocks without the fix in this run ({resident} MiB resident): nothing to show")
    assert _resident_after_free("fixed") < 20


def test_the_gateway_fixes_the_threshold_before_anything_else(monkeypatch):
    calls = []
    monkeypatch.setattr(gateway.app, "fix_mmap_threshold", lambda: calls.append("fixed"))
    with pytest.raises(SystemExit):
        gateway.app.main(["--no-such-flag"])
    assert calls == ["fixed"]
