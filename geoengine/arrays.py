"""Array helpers the hot paths share.

`unique(a)`: the sorted distinct values of an integer or boolean array, by one sort and a mask. NumPy
2.5's `np.unique` without `return_*` arguments takes a hash-table path for integers that is far slower
than sorting on this project's arrays: 5.7 M int64 keys took 5.6 s against 0.07 s (the routing stage's
undirected graph at 64 copies of Liechtenstein), 1,000 took 57 µs against 23 µs with `return_index`.
Other dtypes (floats: NaNs compare unequal) go to `np.unique` unchanged.

`readonly(a)`: a read-only plain-ndarray view (a memory-mapped array's too). Numba compiles a kernel
once per argument type, and the read-only flag is part of the type: arrays given read-only everywhere
(built or mapped, cached or just made) share one specialisation.

`member(values, table)`: `np.isin` for integers by a binary search of each value in the table's sorted
distinct values. `np.isin` sorts values and table together (and first finds the values' distinct ones
with their inverse): about 60 bytes of temporaries per value, which set the graph stage's peak at 64
copies of Liechtenstein; this needs 17.
"""

from __future__ import annotations

import numpy as np


def unique(a) -> np.ndarray:
    """Sorted distinct values of `a` (flattened), as `np.unique(a)`."""
    a = np.asarray(a)
    if a.dtype.kind not in "iub":
        return np.unique(a)
    s = np.sort(a, axis=None)
    if s.size < 2:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def member(values, table) -> np.ndarray:
    """bool array of `values`' shape: whether each value is in `table`, as `np.isin(values, table)`."""
    v = np.asarray(values)
    t = unique(table)
    if t.size == 0 or v.dtype.kind not in "iub" or t.dtype.kind not in "iub":
        return np.isin(v, t)
    pos = np.searchsorted(t, v)
    np.minimum(pos, t.size - 1, out=pos)
    return t[pos] == v


def run_indices(starts, lengths) -> np.ndarray:
    """int64 indices of the runs [starts[i], starts[i] + lengths[i]), one run after the other (a CSR's
    rows gathered without a Python loop)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    return np.repeat(np.asarray(starts, dtype=np.int64) - (ends - lengths), lengths) + np.arange(total, dtype=np.int64)


def readonly(a) -> np.ndarray:
    """A read-only view of `a` (a np.memmap becomes a plain ndarray over the same mapping, cheaper to
    index); see the module docstring."""
    v = np.asarray(a).view()
    v.flags.writeable = False
    return v
