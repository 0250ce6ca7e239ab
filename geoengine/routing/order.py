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
def _reverse_slots(off, adj):
    """rev[j]: the slot of edge (w, v) for slot j = (v, w) in a symmetric CSR with sorted rows."""
    n = off.shape[0] - 1
    rev = np.empty(adj.shape[0], np.int64)
    for v in range(n):
        for j in range(off[v], off[v + 1]):
            w = adj[j]
            a = off[w]
            b = off[w + 1]
            while a < b:
                h = (a + b) >> 1
                if adj[h] < v:
                    a = h + 1
                else:
                    b = h
            rev[j] = a
    return rev


@numba.njit(cache=True, nogil=True)
def _flow_cut(verts, k, off, adj, rev, mark, stamp, tagbase, role, fint, fedge, seen, pnode, pslot, queue, cut):
    """Minimum vertex cut between the vertices with role 1 (sources) and role 2 (sinks) of one part
    (vertices `verts[:k]`, mark == stamp), by unit-capacity augmenting paths (BFS) on the split graph:
    node 2v is v's in-node, 2v+1 its out-node, the arc between them has capacity 1, edges have
    infinite capacity; paths start at a source's in-node and end at a sink's out-node, so every path
    saturates at least one vertex and the flow is at most the number of sources. Writes the cut to
    `cut`; returns (its size, the tag of the last BFS): `seen[2v+1] == tag` marks the source side."""
    bfs = 0
    while True:
        bfs += 1
        tag = tagbase * 1000003 + bfs
        qh = 0
        qt = 0
        for i in range(k):
            v = verts[i]
            if role[v] == 1:
                node = 2 * v
                seen[node] = tag
                pnode[node] = -1
                queue[qt] = node
                qt += 1
        found = -1
        while qh < qt and found < 0:
            node = queue[qh]
            qh += 1
            v = node >> 1
            if node & 1:  # v out: edges to w in, or back into v in against v's own flow
                for j in range(off[v], off[v + 1]):
                    w = adj[j]
                    if mark[w] != stamp:
                        continue
                    x = 2 * w
                    if seen[x] != tag:
                        seen[x] = tag
                        pnode[x] = node
                        pslot[x] = j
                        queue[qt] = x
                        qt += 1
                if fint[v] == 1:
                    x = 2 * v
                    if seen[x] != tag:
                        seen[x] = tag
                        pnode[x] = node
                        pslot[x] = -1
                        queue[qt] = x
                        qt += 1
            else:  # v in: through v (capacity 1), or back to u out against flow on edge (u, v)
                if fint[v] == 0:
                    x = 2 * v + 1
                    if seen[x] != tag:
                        seen[x] = tag
                        pnode[x] = node
                        pslot[x] = -1
                        if role[v] == 2:
                            found = x
                        else:
                            queue[qt] = x
                            qt += 1
                if found >= 0:
                    break
                for j in range(off[v], off[v + 1]):
                    u = adj[j]
                    if mark[u] != stamp or fedge[rev[j]] <= 0:
                        continue
                    x = 2 * u + 1
                    if seen[x] != tag:
                        seen[x] = tag
                        pnode[x] = node
                        pslot[x] = -(rev[j] + 2)  # edge (u, v) traversed backwards
                        queue[qt] = x
                        qt += 1
        if found < 0:
            break
        x = found
        while pnode[x] >= 0:
            p = pnode[x]
            sl = pslot[x]
            if sl >= 0:  # along edge slot sl (p out -> x in)
                r = rev[sl]
                if fedge[r] > 0:
                    fedge[r] -= 1
                else:
                    fedge[sl] += 1
            elif sl == -1:  # a vertex's own arc
                if x == p + 1:
                    fint[x >> 1] = 1
                else:
                    fint[x >> 1] = 0
            else:
                fedge[-sl - 2] -= 1
            x = p
    c = 0
    for i in range(k):
        v = verts[i]
        if seen[2 * v] == tag and seen[2 * v + 1] != tag:
            cut[c] = v
            c += 1
    return c, tag


@numba.njit(cache=True, nogil=True)
def _nd_kernel(n, off, adj, x, y, dirs, leaf, use_flow, share, flow_dirs):
    rank = np.full(n, -1, np.int64)
    perm = np.arange(n).astype(np.int64)
    mark = np.zeros(n, np.int64)  # part stamp of each vertex while its part is being cut
    side = np.zeros(n, np.int8)
    best_side = np.zeros(n, np.int8)
    sep = np.zeros(n, np.bool_)
    stack_a = np.empty(64 + 2 * n, np.int64)
    stack_b = np.empty(64 + 2 * n, np.int64)
    rev = _reverse_slots(off, adj) if use_flow else np.zeros(1, np.int64)
    role = np.zeros(n, np.int8)
    fint = np.zeros(n, np.int8)
    fedge = np.zeros(adj.shape[0] if use_flow else 1, np.int32)
    seen = np.zeros(2 * n if use_flow else 1, np.int64)
    pnode = np.zeros(2 * n if use_flow else 1, np.int64)
    pslot = np.zeros(2 * n if use_flow else 1, np.int64)
    queue = np.zeros(2 * n if use_flow else 1, np.int64)
    cut = np.zeros(n, np.int64)
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
        verts = perm[a:b]
        best_cut = -1
        gcut = np.empty(nd, np.int64)
        for d in range(nd):
            cx = dirs[d, 0]
            cy = dirs[d, 1]
            for i in range(k):
                v = verts[i]
                proj[i] = x[v] * cx + y[v] * cy
            med = np.partition(proj.copy(), k // 2)[k // 2]
            below = 0
            for i in range(k):
                if proj[i] < med:
                    below += 1
            # ties at the median are split by position so both sides get about half
            need = k // 2 - below
            for i in range(k):
                v = verts[i]
                if proj[i] < med:
                    side[v] = 0
                elif proj[i] == med and need > 0:
                    side[v] = 0
                    need -= 1
                else:
                    side[v] = 1
            cutn = 0
            for i in range(k):
                v = verts[i]
                for j in range(off[v], off[v + 1]):
                    w = adj[j]
                    if mark[w] == stamp and side[w] != side[v]:
                        cutn += 1
            gcut[d] = cutn
            if best_cut < 0 or cutn < best_cut:
                best_cut = cutn
                for i in range(k):
                    v = verts[i]
                    best_side[v] = side[v]
        if use_flow:
            # the max-flow cut on the directions whose plain median cut was smallest
            dorder = np.argsort(gcut)
            best_cut = -1
            for t in range(min(flow_dirs, nd)):
                d = dorder[t]
                cx = dirs[d, 0]
                cy = dirs[d, 1]
                for i in range(k):
                    v = verts[i]
                    proj[i] = x[v] * cx + y[v] * cy
                o = np.argsort(proj)
                q = max(1, int(k * share))
                for i in range(k):
                    v = verts[o[i]]
                    role[v] = 1 if i < q else (2 if i >= k - q else 0)
                    fint[v] = 0
                    for j in range(off[v], off[v + 1]):
                        fedge[j] = 0
                c, tag = _flow_cut(verts, k, off, adj, rev, mark, stamp, stamp * 8 + d, role, fint, fedge, seen,
                                   pnode, pslot, queue, cut)
                if best_cut < 0 or c < best_cut:
                    best_cut = c
                    for i in range(k):
                        v = verts[i]
                        sep[v] = False
                        best_side[v] = 0 if seen[2 * v + 1] == tag else 1
                    for i in range(c):
                        sep[cut[i]] = True
                for i in range(k):
                    role[verts[i]] = 0
        if not use_flow:
            # boundary vertices of each side; the smaller set is the separator
            nb0 = 0
            nb1 = 0
            for i in range(k):
                v = verts[i]
                for j in range(off[v], off[v + 1]):
                    w = adj[j]
                    if mark[w] == stamp and best_side[w] != best_side[v]:
                        if best_side[v] == 0:
                            nb0 += 1
                        else:
                            nb1 += 1
                        break
            sep_side = 0 if nb0 <= nb1 else 1
            for i in range(k):
                v = verts[i]
                sep[v] = False
                if best_side[v] == sep_side:
                    for j in range(off[v], off[v + 1]):
                        w = adj[j]
                        if mark[w] == stamp and best_side[w] != sep_side:
                            sep[v] = True
                            break
        nsep = 0
        for i in range(k):
            if sep[verts[i]]:
                nsep += 1
        if nsep == k:
            for i in range(a, b):
                rank[perm[i]] = bottom
                bottom += 1
            continue
        for i in range(a, b):
            v = perm[i]
            if sep[v]:
                top -= 1
                rank[v] = top
        # reorder the slice: side 0, side 1 (separator vertices are ranked and leave the slice)
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


def nested_dissection(n: int, offsets, targets, lon=None, lat=None, *, leaf: int = 2, seed: int = 0,
                      method: str = "flow", share: float = 0.25, flow_dirs: int = 2) -> np.ndarray:
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
    if method not in ("flow", "geometric"):
        raise ValueError("method must be 'flow' or 'geometric'")
    rank = _nd_kernel(n, off, adj, np.ascontiguousarray(xs), np.ascontiguousarray(ys), _DIRS, int(max(leaf, 1)),
                      method == "flow", float(share), int(flow_dirs))
    return rank.astype(np.int32)
