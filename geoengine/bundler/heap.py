"""Give memory a build stage freed back to the system (glibc's allocator).

A stage's temporaries are freed when it returns, but glibc keeps freed memory on its heap (arrays up
to its mmap threshold, which rises to 32 MB after large frees, come from there), so a freed gigabyte
stayed resident for the rest of the build: at 64 copies of Liechtenstein the process held 863 MB after
the graph stage and 946 MB after search, nearly all of it free. `release()` collects garbage and
trims the heap; it does nothing where the C library is not glibc. (A fixed low mmap threshold would
also return memory inside a stage, but it made the routing stage 14% slower with page faults.)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def release() -> None:
    """Collect garbage and return the heap's free memory to the system."""
    gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def mmap_threshold(nbytes: int) -> None:
    """Serve allocations of at least `nbytes` by mmap, so that they go back to the system when freed (glibc's
    M_MMAP_THRESHOLD; it then stays fixed for the rest of the process: its dynamic rise to 32 MB ends)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(-3, int(nbytes))  # M_MMAP_THRESHOLD
