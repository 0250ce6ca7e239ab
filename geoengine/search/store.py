"""On-disk form of a search index: numpy arrays and string columns, memory-mapped on open.

A string column `<name>` is `<name>.bin` (UTF-8 values, concatenated) plus `<name>.off.npy`
(int64 offsets, one more than the number of values); an absent value (None) has the single byte
0x00. The spatial index is an rtree file pair `rtree.idx`/`rtree.dat`.
"""

from __future__ import annotations

import mmap
from itertools import islice
from pathlib import Path

import numpy as np

NONE = b"\x00"


STRING_CHUNK = 65_536  # values encoded and written together (write_strings)


def write_strings(folder: Path, name: str, values) -> list[str]:
    """Write the string column `name` of `values` (any iterable), a chunk of values at a time (one write and
    their sizes in one array per chunk: a write call per value cost twice as much)."""
    sizes = [np.zeros(1, np.int64)]
    it = iter(values)
    with open(folder / f"{name}.bin", "wb") as fh:
        while True:
            parts = [NONE if v is None else v.encode("utf-8") for v in islice(it, STRING_CHUNK)]
            if not parts:
                break
            fh.write(b"".join(parts))
            sizes.append(np.fromiter(map(len, parts), np.int64, len(parts)))
    np.save(folder / f"{name}.off.npy", np.cumsum(np.concatenate(sizes)))
    return [f"{name}.bin", f"{name}.off.npy"]


class Strings:
    """A read-only string column: `col[i]` decodes one value."""

    def __init__(self, folder: Path, name: str):
        self.off = np.load(folder / f"{name}.off.npy", mmap_mode="r")
        size = int(self.off[-1])
        self.blob = np.memmap(folder / f"{name}.bin", dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)
        # the hot path reads through a plain ndarray view of the offsets and a mmap of the bytes: slicing a
        # numpy memmap builds a memmap object per value, which cost more than the decoding itself
        self._off = memoryview(np.ascontiguousarray(self.off.view(np.ndarray))) if len(self.off) else memoryview(b"")
        self._buf = b""
        if size:
            with open(folder / f"{name}.bin", "rb") as fh:
                self._buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)

    def __len__(self) -> int:
        return len(self.off) - 1

    def __getitem__(self, i: int) -> str | None:
        raw = self._buf[self._off[i]:self._off[i + 1]]
        return None if raw == NONE else raw.decode("utf-8")

    def all(self) -> list[str]:
        """Every value (for small columns such as the vocabulary); values must not contain '\\n'."""
        return self.blob.tobytes().decode("utf-8").split("\n")[:-1] if len(self.blob) else []
