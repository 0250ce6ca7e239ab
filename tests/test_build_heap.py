"""geoengine.bundler.heap: the build gives memory a stage freed back to the system."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from geoengine.bundler import heap

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or heap._libc() is None,
                                reason="glibc only")


# Run in a fresh interpreter: a test process that ran other tests before (a pytest-xdist worker) holds
# freed heap pages of its own, which the blocks below would reuse without growing the RSS.
SCRIPT = r"""
import json
from geoengine.bundler import heap
from geoengine.bundler.measure import rss_mb

base = rss_mb()
blocks, keep = [], []
for _ in range(3000):
    blocks.append(bytearray(b"x" * 96 * 1024))  # written, so resident
    keep.append(bytearray(b"y" * 2048))  # a live allocation after every block
grown = rss_mb() - base
del blocks
held = rss_mb() - base
heap.release()
after = rss_mb() - base
print(json.dumps([grown, held, after]))
"""


def test_release_returns_freed_heap_memory():
    """Blocks freed between live ones leave holes that glibc keeps (a fragmented heap, as after a stage's
    temporaries); release() hands them back."""
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=120)
    grown, held, after = json.loads(out.stdout.strip().splitlines()[-1])
    assert grown > 200, (grown, held, after)
    assert held > 150, ("the freed blocks stay resident until the heap is trimmed", grown, held, after)
    assert after < 60, (grown, held, after)
