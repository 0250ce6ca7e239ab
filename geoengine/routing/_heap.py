"""Indexed binary min-heap over vertex ids, for Numba kernels.

The heap lives in three caller-owned arrays so that a search allocates nothing:
`hk` (float64 keys), `hv` (int32 vertices), both of capacity >= number of vertices that can be queued,
and `hpos` (int64 per vertex: index in the heap). `hpos[v]` is only meaningful while the caller's own
per-search stamp says v was touched in this search; the caller sets it to -1 when a vertex is settled.
"""

from __future__ import annotations

import numba


@numba.njit(cache=True, nogil=True, inline="always")
def _sift_up(hk, hv, hpos, i):
    key = hk[i]
    v = hv[i]
    while i > 0:
        p = (i - 1) >> 1
        if hk[p] <= key:
            break
        hk[i] = hk[p]
        hv[i] = hv[p]
        hpos[hv[i]] = i
        i = p
    hk[i] = key
    hv[i] = v
    hpos[v] = i


@numba.njit(cache=True, nogil=True, inline="always")
def _sift_down(hk, hv, hpos, i, size):
    key = hk[i]
    v = hv[i]
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and hk[c + 1] < hk[c]:
            c += 1
        if hk[c] >= key:
            break
        hk[i] = hk[c]
        hv[i] = hv[c]
        hpos[hv[i]] = i
        i = c
    hk[i] = key
    hv[i] = v
    hpos[v] = i


@numba.njit(cache=True, nogil=True)
def heap_push(hk, hv, hpos, size, v, key):
    """Insert v with key; returns the new size."""
    hk[size] = key
    hv[size] = v
    hpos[v] = size
    _sift_up(hk, hv, hpos, size)
    return size + 1


@numba.njit(cache=True, nogil=True)
def heap_decrease(hk, hv, hpos, v, key):
    """Lower the key of v, which is in the heap."""
    i = hpos[v]
    hk[i] = key
    _sift_up(hk, hv, hpos, i)


@numba.njit(cache=True, nogil=True)
def heap_update(hk, hv, hpos, size, v, key):
    """Set the key of v (in the heap) to any value, up or down."""
    i = hpos[v]
    old = hk[i]
    hk[i] = key
    if key < old:
        _sift_up(hk, hv, hpos, i)
    else:
        _sift_down(hk, hv, hpos, i, size)


@numba.njit(cache=True, nogil=True)
def heap_pop(hk, hv, hpos, size):
    """Remove the minimum; returns (vertex, key, new size). hpos of the popped vertex becomes -1."""
    v = hv[0]
    key = hk[0]
    size -= 1
    if size > 0:
        hk[0] = hk[size]
        hv[0] = hv[size]
        hpos[hv[0]] = 0
        _sift_down(hk, hv, hpos, 0, size)
    hpos[v] = -1
    return v, key, size


@numba.njit(cache=True, nogil=True)
def init_labels(vs, off, off2, dist, sec, par, stamp, cur, hk, hv, hpos):
    """Start a search from vertices `vs` with initial labels `off` (primary) and `off2` (secondary):
    the lowest offset wins when a vertex is given twice. Returns the heap size."""
    size = 0
    for i in range(vs.shape[0]):
        v = vs[i]
        o = off[i]
        if stamp[v] != cur:
            stamp[v] = cur
            dist[v] = o
            sec[v] = off2[i]
            par[v] = -1
            size = heap_push(hk, hv, hpos, size, v, o)
        elif o < dist[v]:
            dist[v] = o
            sec[v] = off2[i]
            heap_decrease(hk, hv, hpos, v, o)
    return size
