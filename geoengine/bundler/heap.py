"""Give freed memory back to the system between and inside build stages (glibc's allocator).

A stage's large numpy temporaries are freed when it returns, but glibc keeps what it took on its heap
and raises its mmap threshold after each large free (up to 32 MB), so later allocations of that size
come from the heap too and a freed gigabyte stays resident for the rest of the build: at 64 copies of
Liechtenstein the process held 863 MB after the graph stage and 946 MB after search, all of it free.
`bound()` fixes the threshold at 1 MiB (allocations above it are mapped and unmapped on free);
`release()` collects garbage and trims the heap. Both do nothing where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys

MMAP_THRESHOLD = 1 << 20
_M_MMAP_THRESHOLD = -3  # mallopt parameter (malloc.h)


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:
        return None


def bound() -> bool:
    """Fix the allocator's mmap threshold (no dynamic raise): True when set."""
    libc = _libc()
    return bool(libc and libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def release() -> None:
    """Collect garbage and return the heap's free memory to the system."""
    gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
