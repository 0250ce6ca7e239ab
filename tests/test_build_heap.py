"""geoengine.bundler.heap: the build gives memory a stage freed back to the system."""

from __future__ import annotations

import sys

import pytest

from geoengine.bundler import heap
from geoengine.bundler.measure import rss_mb

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or heap._libc() is None,
                                reason="glibc only")


def test_release_returns_freed_heap_memory():
    """Blocks freed between live ones leave holes that glibc keeps (a fragmented heap, as after a stage's
    temporaries); release() hands them back."""
    base = rss_mb()
    blocks, keep = [], []
    for _ in range(3000):
        blocks.append(bytearray(b"x" * 96 * 1024))  # written, so resident
        keep.append(bytearray(b"y" * 2048))  # a live allocation after every block
    grown = rss_mb() - base
    assert grown > 200
    del blocks
    held = rss_mb() - base
    heap.release()
    after = rss_mb() - base
    assert held > 150, "the freed blocks stay resident until the heap is trimmed"
    assert after < 60, (grown, held, after)
    del keep

