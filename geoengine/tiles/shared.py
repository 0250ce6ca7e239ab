"""Tile cache coherence across the worker processes of one server.

Every worker process keeps its own in-memory tile cache (the archives themselves are shared through
the page cache). A small file, memory-mapped by every worker of one `geoengine serve`, holds per
source a clear generation, and per worker slot the generation its cached entries belong to and how
many entries it holds:

    gen[source]                  bumped by a cache clear
    pid[slot]                    the process owning the slot (0 = free)
    seen[slot, source]           the generation of the slot's cached entries of that source
    count[slot, source]          how many entries of that source the slot caches

A worker compares `gen[source]` with the generation it last saw before every cache lookup (one
integer read from shared memory); when a clear happened elsewhere it drops its entries of that source
first, so once a clear has answered, no worker serves bytes cached before it. The clearing worker
adds up the entries that every live slot holds at the current generation: `cleared` counts all
workers. Updates of `gen` and slot claims take an exclusive `flock` on the file; lookups take none.

Sources are indexed by the sorted list of source ids, the same in every worker (one bundle and one
`GEOENGINE_TILES_DIR`); sources past MAX_SOURCES share the last index (a clear of one then also clears
the others in other workers).
"""

from __future__ import annotations

import fcntl
import mmap
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from geoengine.procs import alive

MAGIC = 0x67656F7469  # "geoti"
VERSION = 1
MAX_WORKERS = 256
MAX_SOURCES = 64
_HEADER = 8
_GEN = _HEADER
_PID = _GEN + MAX_SOURCES
_SEEN = _PID + MAX_WORKERS
_COUNT = _SEEN + MAX_WORKERS * MAX_SOURCES
_WORDS = _COUNT + MAX_WORKERS * MAX_SOURCES


def create_state_file(path: str | Path) -> Path:
    """A zeroed state file for the workers of one server (made by `geoengine serve` before it forks)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    words = np.zeros(_WORDS, dtype=np.int64)
    words[0], words[1] = MAGIC, VERSION
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(words.tobytes())
    os.replace(tmp, path)
    return path


class SharedCacheState:
    """One worker's view of the state file: it claims a slot when opened."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_RDWR)
        size = os.fstat(self._fd).st_size
        if size != _WORDS * 8:
            os.close(self._fd)
            raise ValueError(f"{self.path} is not a worker state file of this version ({size} bytes)")
        self._mm = mmap.mmap(self._fd, size)
        self._words = np.frombuffer(self._mm, dtype=np.int64)
        if int(self._words[0]) != MAGIC or int(self._words[1]) != VERSION:
            raise ValueError(f"{self.path} is not a worker state file of this version")
        self._gen_view = memoryview(self._mm).cast("q")  # plain int reads on the hot path
        self.gen = self._words[_GEN:_PID]
        self.pid = self._words[_PID:_SEEN]
        self.seen = self._words[_SEEN:_COUNT].reshape(MAX_WORKERS, MAX_SOURCES)
        self.count = self._words[_COUNT:_WORDS].reshape(MAX_WORKERS, MAX_SOURCES)
        self.slot = self._claim()

    @contextmanager
    def locked(self):
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _claim(self) -> int:
        me = os.getpid()
        with self.locked():
            for slot in range(MAX_WORKERS):
                pid = int(self.pid[slot])
                if pid == me or not alive(pid):
                    self.pid[slot] = me
                    self.seen[slot, :] = self.gen
                    self.count[slot, :] = 0
                    return slot
        raise RuntimeError(f"more than {MAX_WORKERS} worker processes share {self.path}")

    @staticmethod
    def index(i: int) -> int:
        return min(i, MAX_SOURCES - 1)

    def generation(self, i: int) -> int:
        return self._gen_view[_GEN + i]

    def publish(self, i: int, seen: int, count: int) -> None:
        """This worker's entries of source index i: how many, and of which generation."""
        self.seen[self.slot, i] = seen
        self.count[self.slot, i] = count

    def clear(self, i: int, own_clear) -> tuple[int, int]:
        """Bump source i's generation and clear this worker's entries (`own_clear()` -> entries dropped).

        Returns (entries dropped over every live worker, the new generation). Only entries of the current
        generation count, this worker's too: entries it still holds from before an earlier clear (made
        by another worker, not yet seen here) were counted by that clear, so a second clear right after a
        first reports 0 whichever worker answers it."""
        with self.locked():
            g = int(self.gen[i])
            others = 0
            for slot in range(MAX_WORKERS):
                if slot == self.slot:
                    continue
                pid = int(self.pid[slot])
                if pid and int(self.seen[slot, i]) == g and alive(pid):
                    others += int(self.count[slot, i])
            current = int(self.seen[self.slot, i]) == g
            self.gen[i] = g + 1
            own = own_clear()
            self.publish(i, g + 1, 0)
        return (own if current else 0) + others, g + 1

    def close(self) -> None:
        with self.locked():
            if int(self.pid[self.slot]) == os.getpid():
                self.pid[self.slot] = 0
                self.count[self.slot, :] = 0
        self._gen_view.release()
        del self.gen, self.pid, self.seen, self.count, self._words
        self._mm.close()
        os.close(self._fd)
