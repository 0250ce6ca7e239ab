"""Metric-independent contraction orders for customisable contraction hierarchies (cch.py).

`nested_dissection(n, offsets, targets, lon, lat)` orders the vertices of a directed CSR graph (arcs
are read as undirected edges) by recursive bisection: a part is cut by the straight line through the
median of its vertices' projection on one of four directions (0, 45, 90, 135 degrees), the direction
with the fewest cut edges wins, and the cut edges' endpoints on the side with fewer of them form the
vertex separator. Separators take the highest free ranks (top-down, so a part's separator ranks above
everything inside the part), parts of at most `leaf` vertices take the lowest free ranks. This is
the geometric ("inertial") half of inertial flow; the max-flow refinement of the cut is not done
(see docs/routing-algorithms.md for the measured effect and the comparison with KaHIP).

One Numba kernel, an explicit stack of parts held as slices of one permutation array: O(n + m) per
recursion level with `np.partition` medians, about 25 levels for millions of vertices.
"""

from __future__ import annotations

import numba
import numpy as np

_DIRS = np.array([[1.0, 0.0], [0.70710678, 0.70710678], [0.0, 1.0], [-0.70710678, 0.70710678]])


def undirected(n: int, offsets, targets):
    """Symmetric CSR (offsets int64[n+1], neighbours int32) of a directed CSR graph, without self loops
    and duplicate edges (vectorised)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    keep = src != targets
    a = np.concatenate([src[keep], targets[keep]])
    b = np.concatenate([targets[keep], src[keep]])
    key = np.unique(a * n + b)
    a, b = key // n, key % n
    off = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(a, minlength=n), out=off[1:])
    return off, b.astype(np.int32)


@numba.njit(cache=True, nogil=True)
def _nd_kernel(n, off, adj, x, y, dirs, leaf):
    rank = np.full(n, -1, np.int64)
    perm = np.arange(n).astype(np.int64)
    mark = np.zeros(n, np.int64)  # part stamp of each vertex while its part is being cut
    side = np.zeros(n, np.int8)
    best_side = np.zeros(n, np.int8)
    sep = np.zeros(n, np.bool_)
    stack_a = np.empty(64 + 2 * n, np.int64)
    stack_b = np.empty(64 + 2 * n, np.int64)
    sp = 0
    stack_a[sp] = 0
    stack_b[sp] = n
    sp += 1
    top = n  # next separator rank is top - 1
    bottom = 0
    stamp = 0
    nd = dirs.shape[0]
    while sp > 0:
        sp -= 1
        a = stack_a[sp]
        b = stack_b[sp]
        k = b - a
        if k <= 0:
            continue
        if k <= leaf:
            for i in range(a, b):
                rank[perm[i]] = bottom
                bottom += 1
            continue
        stamp += 1
        for i in range(a, b):
            mark[perm[i]] = stamp
        proj = np.empty(k)
        best_cut = -1
        for d in range(nd):
            cx = dirs[d, 0]
            cy = dirs[d, 1]
            for i in range(k):
                v = perm[a + i]
                proj[i] = x[v] * cx + y[v] * cy
            med = np.partition(proj.copy(), k // 2)[k // 2]
            below = 0
            for i in range(k):
                if proj[i] < med:
                    below += 1
            # ties at the median are split by position so both sides get about half
            need = k // 2 - below
            for i in range(k):
                v = perm[a + i]
                if proj[i] < med:
                    side[v] = 0
                elif proj[i] == med and need > 0:
                    side[v] = 0
                    need -= 1
                else:
                    side[v] = 1
            cut = 0
            for i in range(k):
                v = perm[a + i]
                for j in range(off[v], off[v + 1]):
                    w = adj[j]
                    if mark[w] == stamp and side[w] != side[v]:
                        cut += 1
            if best_cut < 0 or cut < best_cut:
                best_cut = cut
                for i in range(k):
                    v = perm[a + i]
                    best_side[v] = side[v]
        # boundary vertices of each side; the smaller set is the separator
        nb0 = 0
        nb1 = 0
        for i in range(k):
            v = perm[a + i]
            for j in range(off[v], off[v + 1]):
                w = adj[j]
                if mark[w] == stamp and best_side[w] != best_side[v]:
                    if best_side[v] == 0:
                        nb0 += 1
                    else:
                        nb1 += 1
                    break
        sep_side = 0 if nb0 <= nb1 else 1
        nsep = 0
        for i in range(k):
            v = perm[a + i]
            sep[v] = False
            if best_side[v] == sep_side:
                for j in range(off[v], off[v + 1]):
                    w = adj[j]
                    if mark[w] == stamp and best_side[w] != sep_side:
                        sep[v] = True
                        break
            if sep[v]:
                nsep += 1
        if nsep == k:  # cannot happen with k > leaf >= 1 unless every vertex borders the other side
            for i in range(a, b):
                rank[perm[i]] = bottom
                bottom += 1
            continue
        for i in range(a, b):
            v = perm[i]
            if sep[v]:
                top -= 1
                rank[v] = top
        # reorder the slice: side 0, side 1, separator last
        tmp = np.empty(k, np.int64)
        c = 0
        for s in range(2):
            for i in range(a, b):
                v = perm[i]
                if not sep[v] and best_side[v] == s:
                    tmp[c] = v
                    c += 1
        n0 = 0
        for i in range(c):
            if best_side[tmp[i]] == 0:
                n0 += 1
        for i in range(c):
            perm[a + i] = tmp[i]
        stack_a[sp] = a
        stack_b[sp] = a + n0
        sp += 1
        stack_a[sp] = a + n0
        stack_b[sp] = a + c
        sp += 1
    return rank


def nested_dissection(n: int, offsets, targets, lon=None, lat=None, *, leaf: int = 2, seed: int = 0) -> np.ndarray:
    """Contraction order (int32[n]: rank of each vertex) by geometric nested dissection.

    `lon`, `lat`: a position per vertex (for a turn-expanded graph: the middle of the directed edge).
    Without positions the vertices get seeded random ones (any order gives correct CCH answers; only
    the search-space size depends on it)."""
    n = int(n)
    if lon is None or lat is None:
        rng = np.random.default_rng(seed)
        xs, ys = rng.random(n), rng.random(n)
    else:
        lat = np.asarray(lat, dtype=np.float64)
        xs = np.asarray(lon, dtype=np.float64) * np.cos(np.radians(np.nanmean(lat) if n else 0.0))
        ys = lat
    off, adj = undirected(n, offsets, targets)
    rank = _nd_kernel(n, off, adj, np.ascontiguousarray(xs), np.ascontiguousarray(ys), _DIRS, int(max(leaf, 1)))
    return rank.astype(np.int32)
