"""Customisable contraction hierarchies (the Dibbelt-Strasser-Wagner scheme, as in RoutingKit).

Three phases, each over arrays only:

1. **Order** (metric-independent, once per bundle): `geoengine.routing.order.nested_dissection`.
2. **Topology** (`CCHTopology.build`, once per bundle): the chordal supergraph of the graph's
   undirected edges under that order (eliminate vertices by rank; the higher neighbours of a vertex
   become a clique). Every original arc maps to one supergraph edge {lo, hi} (ranks lo < hi); each
   edge has an upward arc lo->hi and a downward arc hi->lo.
3. **Customisation** (`CCHTopology.customise(weights, secondary)`, per metric, milliseconds to about
   a second): original arc weights onto the edges (cheapest of parallel arcs, inf where no arc),
   then the lower-triangle pass: for edge {u, w} and every lower triangle {m, u, w} (m < u < w),
   up(u->w) = min(up, dn(u->m) + up(m->w)) and dn(w->u) = min(dn, dn(w->m) + up(m->u)). A vertex
   writes only its own upward edges and reads those of lower neighbours, which are its descendants
   in the elimination tree: independent subtrees (at most n/32 vertices each) run in parallel
   (`numba.prange`, both cores), then the top of the tree in rank order.

The result of a customisation is a `ContractionHierarchy` (ch.py) in its exact array layout: arcs of
infinite weight are dropped (a blocked or absent direction costs no search work), a shortcut's
middle vertex and two child arcs are the minimising lower triangle, so the existing bidirectional
query with stall-on-demand, the bucket table, the batch pairs kernel and the path unpacking all run
unchanged on it. Ties on the primary weight are broken by the secondary metric.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numba
import numpy as np

from geoengine.routing.ch import (
    ARRAYS,
    INF,
    ContractionHierarchy,
    PathResult,
    as_locations,
    query_ranks,
    query_result,
)
from geoengine.routing.order import lower_bound

FORMAT_VERSION = 1
_PARALLEL_LOCK = threading.Lock()
#: the arrays of a CCH topology (one .npy each in its folder)
TOPOLOGY_ARRAYS = ("rank", "order", "off", "tgt", "row", "dn_off", "dn_src", "dn_edge", "task_off", "task_verts")


@numba.njit(cache=True, nogil=True)
def _chordal(n, uoff, uadj, rank, order):
    """Chordal supergraph in rank space. Returns (off int64[n+1], tgt int32[mc] sorted per row,
    parent int64[n] in the elimination tree (-1 for roots), height int64[n]). `tgt` may be a view of
    a slightly larger buffer: copying it out held both (90 MB at 11 M edges)."""
    cap = max(16, 2 * uadj.shape[0])
    tgt = np.empty(cap, np.int32)
    off = np.zeros(n + 1, np.int64)
    parent = np.full(n, -1, np.int64)
    height = np.zeros(n, np.int64)
    child_head = np.full(n, -1, np.int32)
    child_next = np.full(n, -1, np.int32)
    seen = np.full(n, -1, np.int32)
    buf = np.empty(n, np.int32)
    m = 0
    for r in range(n):
        cnt = 0
        seen[r] = r
        v = order[r]
        for j in range(uoff[v], uoff[v + 1]):
            x = rank[uadj[j]]
            if x > r and seen[x] != r:
                seen[x] = r
                buf[cnt] = x
                cnt += 1
        c = child_head[r]
        while c >= 0:
            for j in range(off[c], off[c + 1]):
                x = tgt[j]
                if x > r and seen[x] != r:
                    seen[x] = r
                    buf[cnt] = x
                    cnt += 1
            c = child_next[c]
        if m + cnt > cap:
            while m + cnt > cap:
                cap += cap // 2
            bigger = np.empty(cap, np.int32)
            bigger[:m] = tgt[:m]
            tgt = bigger
        row = np.sort(buf[:cnt])
        for i in range(cnt):
            tgt[m + i] = row[i]
        m += cnt
        off[r + 1] = m
        if cnt:
            p = row[0]
            parent[r] = p
            child_next[r] = child_head[p]
            child_head[p] = r
            if height[r] + 1 > height[p]:
                height[p] = height[r] + 1
    if cap - m > m // 8:
        return off, tgt[:m].copy(), parent, height
    return off, tgt[:m], parent, height


@numba.njit(cache=True, nogil=True)
def _down_offsets(n, tgt):
    """dn_off: lower neighbours per vertex (a bincount of `tgt` without its int64 copy)."""
    dn_off = np.zeros(n + 1, np.int64)
    for e in range(tgt.shape[0]):
        dn_off[tgt[e] + 1] += 1
    for r in range(n):
        dn_off[r + 1] += dn_off[r]
    return dn_off


@numba.njit(cache=True, nogil=True)
def _down_fill(off, tgt, dn_off, out, edges):
    """The lower neighbours (`edges` False) or the edge numbers (True) of each vertex's lower edges,
    by ascending edge number: a counting sort of the heads, the order a stable argsort of `tgt` gives.
    One array per call, so the other need not exist at the same time."""
    n = off.shape[0] - 1
    fill = dn_off[:-1].copy()
    for r in range(n):
        for e in range(off[r], off[r + 1]):
            t = tgt[e]
            out[fill[t]] = e if edges else r
            fill[t] += 1
    return out


@numba.njit(cache=True, nogil=True)
def _rows(off):
    """row[e]: the row (lower end) of each edge, int32."""
    n = off.shape[0] - 1
    row = np.empty(off[n], np.int32)
    for r in range(n):
        for e in range(off[r], off[r + 1]):
            row[e] = r
    return row


@numba.njit(cache=True, nogil=True)
def _supergraph_edge(off, tgt, ru, rv):
    """The supergraph edge joining ranks ru and rv (rows sorted): -1 when ru == rv (a self loop), -2 when
    the topology has none."""
    if ru == rv:
        return -1
    lo = ru if ru < rv else rv
    hi = rv if ru < rv else ru
    a = lower_bound(tgt, off[lo], off[lo + 1], hi)
    return a if a < off[lo + 1] and tgt[a] == hi else -2


@numba.njit(cache=True, nogil=True)
def _find_edges(offsets, targets, rank, off, tgt):
    """Supergraph edge of every original arc (-1 for a self loop, -2 not in the topology) and whether it
    runs upward."""
    m = targets.shape[0]
    n = offsets.shape[0] - 1
    edge = np.full(m, -1, np.int64)
    up = np.zeros(m, np.bool_)
    for u in range(n):
        ru = rank[u]
        for k in range(offsets[u], offsets[u + 1]):
            rv = rank[targets[k]]
            edge[k] = _supergraph_edge(off, tgt, ru, rv)
            up[k] = edge[k] >= 0 and ru < rv
    return edge, up


@numba.njit(cache=True, nogil=True)
def _count_unconnected(offsets, targets, rank, off, tgt):
    """How many arcs (self loops aside) join vertices without a supergraph edge: `_find_edges`'s -2s,
    without its two per-arc arrays."""
    n = offsets.shape[0] - 1
    bad = 0
    for u in range(n):
        ru = rank[u]
        for k in range(offsets[u], offsets[u + 1]):
            if _supergraph_edge(off, tgt, ru, rank[targets[k]]) == -2:
                bad += 1
    return bad


@numba.njit(cache=True, nogil=True)
def _subset_edges(offsets, targets, base_off, base_tgt, base_edge, base_up):
    """Supergraph edges of the arcs of a sub-CSR whose rows are subsequences of the base CSR's rows (a
    profile's turn graph within the full turn graph): one merge walk, O(base arcs). -2 = not found."""
    m = targets.shape[0]
    n = offsets.shape[0] - 1
    edge = np.full(m, -2, np.int64)
    up = np.zeros(m, np.bool_)
    for u in range(n):
        j = base_off[u]
        end = base_off[u + 1]
        for k in range(offsets[u], offsets[u + 1]):
            t = targets[k]
            j0 = j
            while j < end and base_tgt[j] != t:
                j += 1
            if j == end:  # not in order: search the whole row
                j = base_off[u]
                while j < end and base_tgt[j] != t:
                    j += 1
                if j == end:
                    j = j0
                    continue
            edge[k] = base_edge[j]
            up[k] = base_up[j]
    return edge, up


def _metric_arrays(mc):
    """(up_w, dn_w, up_s, dn_s) before any arc: allocated by numpy, whose large arrays get transparent
    huge pages (an array made inside a kernel faults in 4 KiB pages: about 2.5x slower at 11 M edges)."""
    return np.full(mc, np.inf), np.full(mc, np.inf), np.zeros(mc), np.zeros(mc)


#: a customisation's working arrays over the supergraph's edges, in `customise`'s order
METRIC_BUFFERS = ("up_w", "dn_w", "up_s", "dn_s", "up_m", "dn_m", "up_c1", "up_c2", "dn_c1", "dn_c2", "up_h", "dn_h")


def _new_buffers(mc: int) -> tuple:
    """Fresh working arrays (numpy's allocations: transparent huge pages, see `_metric_arrays`)."""
    up_w, dn_w, up_s, dn_s = _metric_arrays(mc)
    return (up_w, dn_w, up_s, dn_s, np.full(mc, -1, np.int32), np.full(mc, -1, np.int32),
            np.empty(mc, np.int32), np.empty(mc, np.int32), np.empty(mc, np.int32), np.empty(mc, np.int32),
            np.ones(mc, np.int32), np.ones(mc, np.int32))


def _reset_buffers(bufs: tuple) -> tuple:
    """A spare set of working arrays as `_new_buffers` makes them (the children are read only where a
    middle vertex is set, so they keep their old values)."""
    up_w, dn_w, up_s, dn_s, up_m, dn_m, _, _, _, _, up_h, dn_h = bufs
    for a, v in ((up_w, np.inf), (dn_w, np.inf), (up_s, 0.0), (dn_s, 0.0), (up_m, -1), (dn_m, -1), (up_h, 1),
                 (dn_h, 1)):
        a.fill(v)
    return bufs


@numba.njit(cache=True, nogil=True)
def _init_metric(edge, up, weights, secondary, up_w, dn_w, up_s, dn_s):
    for k in range(edge.shape[0]):
        e = edge[k]
        if e < 0:
            continue
        w = weights[k]
        s = secondary[k]
        if up[k]:
            if w < up_w[e] or (w == up_w[e] and s < up_s[e]):
                up_w[e] = w
                up_s[e] = s
        else:
            if w < dn_w[e] or (w == dn_w[e] and s < dn_s[e]):
                dn_w[e] = w
                dn_s[e] = s
    return up_w, dn_w, up_s, dn_s


@numba.njit(cache=True, nogil=True)
def _lower_triangles(u, off, tgt, dn_off, dn_src, dn_edge, up_w, dn_w, up_s, dn_s, up_m, dn_m, up_c1, up_c2,
                     dn_c1, dn_c2, up_h, dn_h, pos):
    # pos[w] = edge {u, w} for every upper neighbour w of u (only these entries are read below: the upper
    # neighbours of a lower neighbour m beyond u are upper neighbours of u, the supergraph is chordal)
    for j in range(off[u], off[u + 1]):
        pos[tgt[j]] = j
    for t in range(dn_off[u], dn_off[u + 1]):
        m = dn_src[t]
        e1 = dn_edge[t]  # edge {m, u}
        a1u = up_w[e1]  # m -> u
        a1d = dn_w[e1]  # u -> m
        if a1u == np.inf and a1d == np.inf:
            continue
        for k2 in range(e1 + 1, off[m + 1]):  # edges {m, w}, w > u
            j = pos[tgt[k2]]
            # u -> m -> w
            c = a1d + up_w[k2]
            if c < up_w[j] or (c == up_w[j] and c < np.inf and dn_s[e1] + up_s[k2] < up_s[j]):
                up_w[j] = c
                up_s[j] = dn_s[e1] + up_s[k2]
                up_m[j] = m
                up_c1[j] = e1
                up_c2[j] = k2
                up_h[j] = dn_h[e1] + up_h[k2]
            # w -> m -> u
            c = dn_w[k2] + a1u
            if c < dn_w[j] or (c == dn_w[j] and c < np.inf and dn_s[k2] + up_s[e1] < dn_s[j]):
                dn_w[j] = c
                dn_s[j] = dn_s[k2] + up_s[e1]
                dn_m[j] = m
                dn_c1[j] = k2
                dn_c2[j] = e1
                dn_h[j] = dn_h[k2] + up_h[e1]


@numba.njit(cache=True, nogil=True)
def _better(c, c2, w, s):
    return c < w or (c == w and c < np.inf and c2 < s)


@numba.njit(cache=True, nogil=True)
def _upper_triangles(w, off, tgt, dn_off, dn_src, dn_edge, up_w, dn_w, up_s, dn_s, up_d, dn_d, pos):
    """Perfect customisation, the triangles {u, w, x} (u < w < x) whose middle vertex is w: with edges
    a = {u, w}, b = {w, x}, c = {u, x}: u->w <= u->x->w and w->u <= w->x->u (upper triangle of a),
    u->x <= u->w->x and x->u <= x->w->u (intermediate triangle of c). Middles run in descending rank,
    so row w (every b) is final here: it is only written by middles above w. The same enumeration as
    the lower-triangle pass (lower neighbours u of w, then u's row beyond w). A weight lowered here
    (primary, then secondary) marks its arc unneeded: a shortest path between its ends runs through a
    vertex above its lower end."""
    for j in range(off[w], off[w + 1]):
        pos[tgt[j]] = j
    for t in range(dn_off[w], dn_off[w + 1]):
        ja = dn_edge[t]  # {u, w}
        for jc in range(ja + 1, off[dn_src[t] + 1]):  # {u, x}, x > w
            kb = pos[tgt[jc]]  # {w, x}
            c = up_w[jc] + dn_w[kb]
            c2 = up_s[jc] + dn_s[kb]
            if _better(c, c2, up_w[ja], up_s[ja]):
                up_w[ja] = c
                up_s[ja] = c2
                up_d[ja] = True
            c = up_w[kb] + dn_w[jc]
            c2 = up_s[kb] + dn_s[jc]
            if _better(c, c2, dn_w[ja], dn_s[ja]):
                dn_w[ja] = c
                dn_s[ja] = c2
                dn_d[ja] = True
            c = up_w[ja] + up_w[kb]
            c2 = up_s[ja] + up_s[kb]
            if _better(c, c2, up_w[jc], up_s[jc]):
                up_w[jc] = c
                up_s[jc] = c2
                up_d[jc] = True
            c = dn_w[kb] + dn_w[ja]
            c2 = dn_s[kb] + dn_s[ja]
            if _better(c, c2, dn_w[jc], dn_s[jc]):
                dn_w[jc] = c
                dn_s[jc] = c2
                dn_d[jc] = True


@numba.njit(cache=True, nogil=True, parallel=True)
def _perfect_parallel(off, tgt, dn_off, dn_src, dn_edge, task_off, task_verts, up_w, dn_w, up_s, dn_s, up_d, dn_d,
                      chunks):
    """Top part first (descending rank, serial: its middles write rows inside the subtrees), then the
    independent subtrees in parallel (each in descending rank)."""
    n = off.shape[0] - 1
    nt = task_off.shape[0] - 2
    pos = np.empty((chunks, max(n, 1)), np.int64)
    p = pos[0]
    for i in range(task_off[nt + 1] - 1, task_off[nt] - 1, -1):
        _upper_triangles(task_verts[i], off, tgt, dn_off, dn_src, dn_edge, up_w, dn_w, up_s, dn_s, up_d, dn_d, p)
    for c in numba.prange(chunks):
        q = pos[c]
        for t in range(c, nt, chunks):
            for i in range(task_off[t + 1] - 1, task_off[t] - 1, -1):
                _upper_triangles(task_verts[i], off, tgt, dn_off, dn_src, dn_edge, up_w, dn_w, up_s, dn_s, up_d, dn_d,
                                 q)


@numba.njit(cache=True, nogil=True)
def _perfect_serial(off, tgt, dn_off, dn_src, dn_edge, up_w, dn_w, up_s, dn_s, up_d, dn_d):
    n = off.shape[0] - 1
    pos = np.empty(max(n, 1), np.int64)
    for w in range(n - 1, -1, -1):
        _upper_triangles(w, off, tgt, dn_off, dn_src, dn_edge, up_w, dn_w, up_s, dn_s, up_d, dn_d, pos)


@numba.njit(cache=True, nogil=True)
def _keep_children(n, off, up_w, dn_w, up_m, dn_m, up_c1, up_c2, dn_c1, dn_c2, up_d, dn_d):
    """Arcs kept after pruning must unpack through kept arcs. In exact arithmetic the children of an
    arc whose weight perfect customisation did not lower were not lowered either; this pass keeps them
    anyway should rounding say otherwise (top-down: children lie in lower rows)."""
    for r in range(n - 1, -1, -1):
        for e in range(off[r], off[r + 1]):
            if up_w[e] < np.inf and not up_d[e] and up_m[e] >= 0:
                dn_d[up_c1[e]] = False
                up_d[up_c2[e]] = False
            if dn_w[e] < np.inf and not dn_d[e] and dn_m[e] >= 0:
                dn_d[dn_c1[e]] = False
                up_d[dn_c2[e]] = False


@numba.njit(cache=True, nogil=True, parallel=True)
def _customise_parallel(off, tgt, dn_off, dn_src, dn_edge, task_off, task_verts, up_w, dn_w, up_s, dn_s, up_m, dn_m,
                        up_c1, up_c2, dn_c1, dn_c2, up_h, dn_h, chunks):
    """Independent subtrees of the elimination tree in parallel (each in rank order), then the top."""
    n = off.shape[0] - 1
    nt = task_off.shape[0] - 2
    pos = np.empty((chunks, max(n, 1)), np.int64)  # one scratch row per chunk of tasks
    for c in numba.prange(chunks):
        p = pos[c]
        for t in range(c, nt, chunks):
            for i in range(task_off[t], task_off[t + 1]):
                _lower_triangles(task_verts[i], off, tgt, dn_off, dn_src, dn_edge, up_w, dn_w, up_s, dn_s, up_m,
                                 dn_m, up_c1, up_c2, dn_c1, dn_c2, up_h, dn_h, p)
    p = pos[0]
    for i in range(task_off[nt], task_off[nt + 1]):
        _lower_triangles(task_verts[i], off, tgt, dn_off, dn_src, dn_edge, up_w, dn_w, up_s, dn_s, up_m, dn_m,
                         up_c1, up_c2, dn_c1, dn_c2, up_h, dn_h, p)


@numba.njit(cache=True, nogil=True)
def _customise_serial(off, tgt, dn_off, dn_src, dn_edge, task_off, task_verts, up_w, dn_w, up_s, dn_s, up_m, dn_m,
                      up_c1, up_c2, dn_c1, dn_c2, up_h, dn_h):
    n = off.shape[0] - 1
    pos = np.empty(max(n, 1), np.int64)
    for u in range(n):  # rank order: every lower edge is final before it is read
        _lower_triangles(u, off, tgt, dn_off, dn_src, dn_edge, up_w, dn_w, up_s, dn_s, up_m, dn_m,
                         up_c1, up_c2, dn_c1, dn_c2, up_h, dn_h, pos)


@numba.njit(cache=True, nogil=True)
def _subtree_tasks(n, parent, thr):
    size = np.ones(n, np.int64)
    for v in range(n):
        p = parent[v]
        if p >= 0:
            size[p] += size[v]
    task = np.full(n, -1, np.int64)
    nt = 0
    for v in range(n - 1, -1, -1):
        p = parent[v]
        if size[v] <= thr and (p < 0 or size[p] > thr):
            task[v] = nt
            nt += 1
        elif p >= 0 and task[p] >= 0:
            task[v] = task[p]
    cnt = np.zeros(nt + 2, np.int64)
    for v in range(n):
        t = task[v] if task[v] >= 0 else nt
        cnt[t + 1] += 1
    for t in range(nt + 1):
        cnt[t + 1] += cnt[t]
    pos = cnt[:-1].copy()
    verts = np.empty(n, np.int64)
    for v in range(n):  # rank order within each task
        t = task[v] if task[v] >= 0 else nt
        verts[pos[t]] = v
        pos[t] += 1
    return cnt, verts


@numba.njit(cache=True, nogil=True, parallel=True)
def _mid_ids(up_m, dn_m, order, U_mid, D_mid, up_c1, up_c2, dn_c1, dn_c2):
    """Middle vertices of the customised arcs as original ids; an original arc gets -1 and so do its
    child fields (as `_compact` writes them). On every core."""
    for e in numba.prange(up_m.shape[0]):
        _mid_id(e, up_m, dn_m, order, U_mid, D_mid, up_c1, up_c2, dn_c1, dn_c2)


@numba.njit(cache=True, nogil=True)
def _mid_ids_serial(up_m, dn_m, order, U_mid, D_mid, up_c1, up_c2, dn_c1, dn_c2):
    for e in range(up_m.shape[0]):
        _mid_id(e, up_m, dn_m, order, U_mid, D_mid, up_c1, up_c2, dn_c1, dn_c2)


@numba.njit(cache=True, nogil=True, inline="always")
def _mid_id(e, up_m, dn_m, order, U_mid, D_mid, up_c1, up_c2, dn_c1, dn_c2):
    _mid_of(e, up_m, order, U_mid, up_c1, up_c2)
    _mid_of(e, dn_m, order, D_mid, dn_c1, dn_c2)


@numba.njit(cache=True, nogil=True, inline="always")
def _mid_of(e, mids, order, out, c1, c2):
    """One direction of `_mid_id`: arc e's middle vertex as an original id, or -1 and no children."""
    m = mids[e]
    if m >= 0:
        out[e] = order[m]
    else:
        out[e] = -1
        c1[e] = -1
        c2[e] = -1


@numba.njit(cache=True, nogil=True)
def _count_rows(r0, r1, off, up_w, dn_w, up_d, dn_d, U_off, D_off):
    """Kept arcs of rows r0..r1-1 into U_off[r + 1] / D_off[r + 1] (prefix sums come after)."""
    for r in range(r0, r1):
        cu = 0
        cd = 0
        for e in range(off[r], off[r + 1]):
            if up_w[e] < np.inf and not up_d[e]:
                cu += 1
            if dn_w[e] < np.inf and not dn_d[e]:
                cd += 1
        U_off[r + 1] = cu
        D_off[r + 1] = cd


@numba.njit(cache=True, nogil=True)
def _number_rows(r0, r1, off, up_w, dn_w, up_d, dn_d, U_off, D_off, up_new, dn_new):
    """New arc numbers of rows r0..r1-1 from the rows' prefix sums (-1: dropped)."""
    for r in range(r0, r1):
        ku = U_off[r]
        kd = D_off[r]
        for e in range(off[r], off[r + 1]):
            if up_w[e] < np.inf and not up_d[e]:
                up_new[e] = ku
                ku += 1
            else:
                up_new[e] = -1
            if dn_w[e] < np.inf and not dn_d[e]:
                dn_new[e] = kd
                kd += 1
            else:
                dn_new[e] = -1


@numba.njit(cache=True, nogil=True)
def _fill_rows(r0, r1, off, tgt, order, up_w, dn_w, up_s, dn_s, up_m, dn_m, up_c1, up_c2, dn_c1, dn_c2, up_h, dn_h,
               up_new, dn_new, U_tgt, U_row, U_w, U_s, U_mid, U_c1, U_c2, U_h,
               D_tgt, D_row, D_w, D_s, D_mid, D_c1, D_c2, D_h):
    """The kept arcs of rows r0..r1-1 written at their new numbers (children renumbered, middle vertices
    as original ids)."""
    for r in range(r0, r1):
        for e in range(off[r], off[r + 1]):
            k = up_new[e]
            if k >= 0:
                U_tgt[k] = tgt[e]
                U_row[k] = r
                U_w[k] = up_w[e]
                U_s[k] = up_s[e]
                m = up_m[e]
                U_mid[k] = order[m] if m >= 0 else -1
                U_c1[k] = dn_new[up_c1[e]] if m >= 0 else -1
                U_c2[k] = up_new[up_c2[e]] if m >= 0 else -1
                U_h[k] = up_h[e]
            k = dn_new[e]
            if k >= 0:
                D_tgt[k] = tgt[e]
                D_row[k] = r
                D_w[k] = dn_w[e]
                D_s[k] = dn_s[e]
                m = dn_m[e]
                D_mid[k] = order[m] if m >= 0 else -1
                D_c1[k] = dn_new[dn_c1[e]] if m >= 0 else -1
                D_c2[k] = up_new[dn_c2[e]] if m >= 0 else -1
                D_h[k] = dn_h[e]


@numba.njit(cache=True, nogil=True, parallel=True)
def _compact_chunks(bounds, off, tgt, order, up_w, dn_w, up_s, dn_s, up_m, dn_m, up_c1, up_c2, dn_c1, dn_c2, up_h,
                    dn_h, up_d, dn_d, U_off, D_off, up_new, dn_new, U, D, step):
    """One of `_compact`'s three steps over row chunks on every core (a call per chunk, not per row:
    each call passes every array with reference counting)."""
    for c in numba.prange(bounds.shape[0] - 1):
        r0, r1 = bounds[c], bounds[c + 1]
        if step == 0:
            _count_rows(r0, r1, off, up_w, dn_w, up_d, dn_d, U_off, D_off)
        elif step == 1:
            _number_rows(r0, r1, off, up_w, dn_w, up_d, dn_d, U_off, D_off, up_new, dn_new)
        else:
            _fill_rows(r0, r1, off, tgt, order, up_w, dn_w, up_s, dn_s, up_m, dn_m, up_c1, up_c2, dn_c1, dn_c2,
                       up_h, dn_h, up_new, dn_new, *U, *D)


_COMPACT_CHUNKS = 64


def _compact(n, off, tgt, order, up_w, dn_w, up_s, dn_s, up_m, dn_m, up_c1, up_c2, dn_c1, dn_c2, up_h, dn_h,
             up_d, dn_d, chunks: int):
    """Drop arcs of infinite weight and arcs perfect customisation proved unneeded (up_d/dn_d); renumber
    children; middle vertices to original ids. Kept arcs are counted per row, numbered from the rows'
    prefix sums (arcs are in row order, so the numbers do not depend on the split) and written row by
    row: in `chunks` row ranges on every core (the caller holds the parallel lock), or, with 0, in this
    thread. The arrays are allocated by numpy (see `_metric_arrays`)."""
    U_off = np.zeros(n + 1, np.int64)
    D_off = np.zeros(n + 1, np.int64)
    mc = tgt.shape[0]
    up_new = np.empty(mc, np.int64)
    dn_new = np.empty(mc, np.int64)
    bounds = np.linspace(0, n, max(chunks, 1) + 1).astype(np.int64)
    nothing = (np.empty(0, np.int32), np.empty(0, np.int32), np.empty(0), np.empty(0), np.empty(0, np.int32),
               np.empty(0, np.int32), np.empty(0, np.int32), np.empty(0, np.int32))
    state = [off, tgt, order, up_w, dn_w, up_s, dn_s, up_m, dn_m, up_c1, up_c2, dn_c1, dn_c2, up_h, dn_h, up_d,
             dn_d, U_off, D_off, up_new, dn_new]
    if chunks:
        _compact_chunks(bounds, *state, nothing, nothing, 0)
    else:
        _count_rows(0, n, off, up_w, dn_w, up_d, dn_d, U_off, D_off)
    np.cumsum(U_off, out=U_off)
    np.cumsum(D_off, out=D_off)
    nu, nd = int(U_off[n]), int(D_off[n])
    U = (np.empty(nu, np.int32), np.empty(nu, np.int32), np.empty(nu), np.empty(nu), np.empty(nu, np.int32),
         np.empty(nu, np.int32), np.empty(nu, np.int32), np.empty(nu, np.int32))
    D = (np.empty(nd, np.int32), np.empty(nd, np.int32), np.empty(nd), np.empty(nd), np.empty(nd, np.int32),
         np.empty(nd, np.int32), np.empty(nd, np.int32), np.empty(nd, np.int32))
    if chunks:
        _compact_chunks(bounds, *state, U, D, 1)
        _compact_chunks(bounds, *state, U, D, 2)
    else:
        _number_rows(0, n, off, up_w, dn_w, up_d, dn_d, U_off, D_off, up_new, dn_new)
        _fill_rows(0, n, off, tgt, order, up_w, dn_w, up_s, dn_s, up_m, dn_m, up_c1, up_c2, dn_c1, dn_c2, up_h, dn_h,
                   up_new, dn_new, *U, *D)
    return (U_off, *U, D_off, *D)


# ---------------------------------------------------------------------------------------------------
# elimination-tree queries (after perfect customisation)
# ---------------------------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _et_side(vs, off, off2, parent, a_off, a_tgt, a_w, a_s, dist, sec, par, stamp, cur, buf):
    """One side of an elimination-tree query: label every ancestor of the start vertices (in rank
    order, so every lower arc is final before it is scanned) by relaxing all its arcs. No queue, no
    stopping test: after perfect customisation the search space is exactly the ancestors. Returns the
    number of ancestors listed in buf (sorted by rank)."""
    cnt = 0
    for i in range(vs.shape[0]):
        x = vs[i]
        while x >= 0 and stamp[x] != cur:
            stamp[x] = cur
            dist[x] = INF
            sec[x] = INF
            par[x] = -1
            buf[cnt] = x
            cnt += 1
            x = parent[x]
    for i in range(vs.shape[0]):
        v = vs[i]
        if off[i] < dist[v]:
            dist[v] = off[i]
            sec[v] = off2[i]
    buf[:cnt].sort()
    for i in range(cnt):
        x = buf[i]
        d = dist[x]
        if d == INF:
            continue
        sx = sec[x]
        for k in range(a_off[x], a_off[x + 1]):
            y = a_tgt[k]
            nd = d + a_w[k]
            if nd < dist[y]:
                dist[y] = nd
                sec[y] = sx + a_s[k]
                par[y] = k
    return cnt


@numba.njit(cache=True, nogil=True)
def _et_p2p(parent, up_off, up_tgt, up_w, up_s, dn_off, dn_tgt, dn_w, dn_s, src, soff, soff2, tgt, toff, toff2,
            fd, fs, fp, fst, bd, bs, bp, bst, ctr, fbuf, bbuf):
    """Point-to-point by elimination-tree walk: (best primary, best secondary, meeting vertex or -1)."""
    ctr[0] += 1
    cur = ctr[0]
    nf = _et_side(src, soff, soff2, parent, up_off, up_tgt, up_w, up_s, fd, fs, fp, fst, cur, fbuf)
    _et_side(tgt, toff, toff2, parent, dn_off, dn_tgt, dn_w, dn_s, bd, bs, bp, bst, cur, bbuf)
    best = INF
    best2 = INF
    mv = -1
    for i in range(nf):
        x = fbuf[i]
        if bst[x] == cur:
            c = fd[x] + bd[x]
            if c < best or (c == best and c < INF and fs[x] + bs[x] < best2):
                best = c
                best2 = fs[x] + bs[x]
                mv = x
    return best, best2, mv


@numba.njit(cache=True, nogil=True)
def _et_pairs(parent, up_off, up_tgt, up_w, up_s, dn_off, dn_tgt, dn_w, dn_s, sv, so, so2, sptr, tv, to, to2, tptr,
              fd, fs, fp, fst, bd, bs, bp, bst, ctr, fbuf, bbuf):
    k = sptr.shape[0] - 1
    P = np.full(k, INF)
    S = np.full(k, INF)
    for i in range(k):
        a, b = sptr[i], sptr[i + 1]
        c, d = tptr[i], tptr[i + 1]
        if a == b or c == d:
            continue
        best, best2, mv = _et_p2p(parent, up_off, up_tgt, up_w, up_s, dn_off, dn_tgt, dn_w, dn_s, sv[a:b], so[a:b],
                                  so2[a:b], tv[c:d], to[c:d], to2[c:d], fd, fs, fp, fst, bd, bs, bp, bst, ctr, fbuf,
                                  bbuf)
        if mv >= 0:
            P[i] = best
            S[i] = best2
    return P, S


@numba.njit(cache=True, nogil=True)
def et_query_kernel(n, rank, order, parent, up_off, up_tgt, up_w, up_s, up_row, up_mid, up_c1, up_c2, up_hops,
                     dn_off, dn_tgt, dn_w, dn_s, dn_row, dn_mid, dn_c1, dn_c2, dn_hops, sv, so, so2, tv, to, to2,
                     want_path, fd, fs, fp, fst, bd, bs, bp, bst, ctr, fbuf, bbuf):
    """The hierarchy's query without force_loop in one call (`ch._query_kernel`: ranks, search, unpacked path,
    candidates used) with the elimination-tree walk; what `routing.plainroute` calls too."""
    status, sr, tr = query_ranks(n, rank, sv, tv)
    if status < 0:
        return status, INF, INF, np.empty(0, np.int64), -1, -1
    best, best2, mv = _et_p2p(parent, up_off, up_tgt, up_w, up_s, dn_off, dn_tgt, dn_w, dn_s, sr, so, so2, tr, to,
                              to2, fd, fs, fp, fst, bd, bs, bp, bst, ctr, fbuf, bbuf)
    return query_result(best, best2, mv, want_path, sr, so, tr, to, fd, fp, bd, bp, order, up_row, up_tgt, up_mid,
                         up_c1, up_c2, up_hops, dn_row, dn_tgt, dn_mid, dn_c1, dn_c2, dn_hops)


class CustomisedCH(ContractionHierarchy):
    """A `ContractionHierarchy` made by customising a CCH topology for one metric. Identical results;
    `_orig_out` (used by `query(..., force_loop=True)`) comes from the customised arcs' originals. With
    `parent` (the elimination tree; given after perfect customisation) point-to-point queries and batch
    pairs walk the elimination tree instead of running a bidirectional Dijkstra."""

    def __init__(self, n: int, arrays: dict, info: dict | None = None, parent=None, shared=()):
        super().__init__(n, arrays, info)
        self.parent = None if parent is None else np.asarray(parent, np.int64)
        self._shared = frozenset(shared)  # arrays that are the topology's (not counted by nbytes)

    @property
    def _orig_out(self):
        """The usable original arcs by tail (force_loop queries); made at the first such query."""
        out = self.__dict__.get("_orig_out_arrays")
        if out is None:
            n, offsets, targets, weights, secondary = self._orig_args
            out = self.__dict__["_orig_out_arrays"] = _original_out(
                n, np.asarray(offsets, np.int64), np.asarray(targets, np.int64), weights, secondary)
        return out

    @_orig_out.setter
    def _orig_out(self, value):
        self.__dict__["_orig_out_arrays"] = value

    def query(self, sources, targets, source_offsets=None, target_offsets=None, source_offsets2=None,
              target_offsets2=None, *, force_loop=False, path=True) -> PathResult:
        if self.parent is None or force_loop:  # force_loop: the base class expands sources, then `_search`
            return super().query(sources, targets, source_offsets, target_offsets, source_offsets2, target_offsets2,
                                 force_loop=force_loop, path=path)
        sv, so, so2 = as_locations(sources, source_offsets, source_offsets2, "sources")
        tv, to, to2 = as_locations(targets, target_offsets, target_offsets2, "targets")
        ws = self.workspace()
        f, b = ws.forward, ws.backward
        fb, bb = ws.tree
        status, best, best2, p, si, ti = et_query_kernel(
            self.n, self.rank, self.order, self.parent, self.up_off, self.up_tgt, self.up_w, self.up_s, self.up_row,
            self.up_mid, self.up_c1, self.up_c2, self.up_hops, self.dn_off, self.dn_tgt, self.dn_w, self.dn_s,
            self.dn_row, self.dn_mid, self.dn_c1, self.dn_c2, self.dn_hops, sv, so, so2, tv, to, to2, bool(path),
            f[0], f[1], f[2], f[3], b[0], b[1], b[2], b[3], ws.counter, fb, bb)
        if status < 0:
            raise ValueError(f"{'sources' if status == -1 else 'targets'}: vertex out of range [0, {self.n})")
        return PathResult(float(best), float(best2), p, int(si), int(ti))

    def _search(self, sr, so, so2, tr, to, to2, ws):
        if self.parent is None:
            return super()._search(sr, so, so2, tr, to, to2, ws)
        f, b = ws.forward, ws.backward
        fb, bb = ws.tree
        return _et_p2p(self.parent, self.up_off, self.up_tgt, self.up_w, self.up_s, self.dn_off, self.dn_tgt,
                       self.dn_w, self.dn_s, sr, so, so2, tr, to, to2, f[0], f[1], f[2], f[3], b[0], b[1], b[2], b[3],
                       ws.counter, fb, bb)

    def _pairs(self, sv, so, so2, sp, tv, to, to2, tp, ws):
        if self.parent is None:
            return super()._pairs(sv, so, so2, sp, tv, to, to2, tp, ws)
        f, b = ws.forward, ws.backward
        fb, bb = ws.tree
        return _et_pairs(self.parent, self.up_off, self.up_tgt, self.up_w, self.up_s, self.dn_off, self.dn_tgt,
                         self.dn_w, self.dn_s, sv, so, so2, sp, tv, to, to2, tp, f[0], f[1], f[2], f[3], b[0], b[1],
                         b[2], b[3], ws.counter, fb, bb)

    def nbytes(self) -> int:
        skip = {"rank", "order", *getattr(self, "_shared", ())}
        return int(sum(getattr(self, name).nbytes for name in ARRAYS if name not in skip))


def supergraph(n: int, uoff, uadj, rank):
    """(off, tgt, parent, height) of the chordal supergraph (`_chordal`) of the symmetric CSR (uoff, uadj)
    (`geoengine.routing.order.undirected`) under `rank`."""
    rank = np.ascontiguousarray(rank, dtype=np.int32)
    order = np.empty(int(n), np.int32)
    order[rank] = np.arange(int(n), dtype=np.int32)
    return _chordal(int(n), np.ascontiguousarray(uoff, np.int64), np.ascontiguousarray(uadj, np.int32), rank, order)


class CCHTopology:
    """Order + chordal supergraph of one graph, shared by every metric. Build once, customise often.

    Arrays (rank space): `off`/`tgt`/`row`: the supergraph's upward edges (row r lists x > r, sorted);
    `dn_off`/`dn_src`/`dn_edge`: for each vertex u, the lower neighbours m and the edge {m, u};
    `task_off`/`task_verts`: the customisation schedule: independent subtrees of the elimination tree
    (each in rank order, customised in parallel), and last the top part (in rank order, serial).
    """

    def __init__(self, n: int, arrays: dict, info: dict | None = None):
        self.n = int(n)
        for name in TOPOLOGY_ARRAYS:
            setattr(self, name, arrays[name])
        self.info = dict(info or {})
        self._arc_map: dict = {}
        self._base = None
        # one spare set of working arrays (METRIC_BUFFERS): a perfect customisation's, once compacted,
        # for the next customisation. Memory a process has just freed is quick to take again, but in a
        # while the system takes it back, and then fresh arrays cost their first touch: at 64 copies of
        # Liechtenstein (11 M supergraph edges, 0.7 GB of arrays) 2-3 s of system time in this
        # project's VMs, against 0.1 s to refill a spare. Held while idle: the size of the basic
        # customisation that each new metric holds anyway until its perfect one replaces it.
        # Only where new speeds are expected (`keep_spare`, set by the router: the bundle has measured
        # speeds, or Settings.speeds_spare): elsewhere the memory goes back at once (at 64 copies, 0.7 GB
        # per process that a server without traffic feeds would hold for nothing).
        self.keep_spare = False
        self._spare = None
        self._spare_lock = threading.Lock()
        self.spare_hits = 0  # customisations that took the spare (tests, benchmarks)

    @property
    def edges(self) -> int:
        return int(self.tgt.shape[0])

    @classmethod
    def build(cls, n: int, offsets, targets, rank=None, *, lon=None, lat=None, directory=None) -> CCHTopology:
        """Topology of the CSR graph (its arcs as undirected edges). `rank`: int[n] contraction order
        (vertex -> rank); default: `nested_dissection` on `lon`/`lat` positions. `directory`: write the
        topology there (as `save`) while it is built, each array as soon as it is made, and return it
        memory-mapped from there."""
        from geoengine.routing.order import nested_dissection, undirected

        n = int(n)
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        targets = np.asarray(targets)
        if offsets.shape != (n + 1,) or offsets[0] != 0 or offsets[-1] != targets.shape[0]:
            raise ValueError("offsets must be int64[n+1] starting at 0 and ending at len(targets)")
        if targets.size and (targets.min() < 0 or targets.max() >= n):
            raise ValueError("targets out of range")
        if rank is not None:
            rank = np.asarray(rank)
            if rank.shape != (n,) or (n and not np.array_equal(np.sort(rank), np.arange(n))):
                raise ValueError("rank must be a permutation of 0..n-1")
        t0 = time.perf_counter()
        uoff, uadj = undirected(n, offsets, targets)
        if rank is None:
            rank = nested_dissection(n, uoff, uadj, lon, lat, symmetric=True)
        t1 = time.perf_counter()
        chordal = supergraph(n, uoff, uadj, rank)
        del uoff, uadj
        return cls.assemble(n, rank, chordal, {"arcs": int(targets.shape[0]), "order_seconds": round(t1 - t0, 3)},
                            t1, directory)

    @classmethod
    def assemble(cls, n: int, rank, chordal, info: dict, t1: float, directory=None) -> CCHTopology:
        """The topology from an order and its chordal supergraph (`supergraph`): the lower edges of each
        vertex and the customisation schedule. `info` goes to the topology's info; `t1`: when the
        supergraph's construction began (for `topology_seconds`). With `directory`, as `build`: each
        array is saved and dropped once made (at 64 copies of Liechtenstein the arrays held together
        were most of the routing stage's peak)."""
        off, tgt, parent, height = chordal
        del chordal
        n = int(n)
        mc = int(tgt.shape[0])
        arrays: dict = {}
        d = None if directory is None else Path(directory)
        if d is not None:
            d.mkdir(parents=True, exist_ok=True)

        def put(name, a):
            if d is None:
                arrays[name] = a
            else:
                np.save(d / f"{name}.npy", np.ascontiguousarray(a))

        rank = np.asarray(rank, dtype=np.int32)
        order = np.empty(n, np.int32)
        order[rank] = np.arange(n, dtype=np.int32)
        put("rank", rank)
        put("order", order)
        del order
        task_off, task_verts = _subtree_tasks(n, parent, max(n // 32, 1))
        del parent
        top = int(task_off[-1] - task_off[-2])
        put("task_off", task_off)
        put("task_verts", task_verts)
        del task_verts
        put("row", _rows(off))
        dn_off = _down_offsets(n, tgt)
        put("dn_src", _down_fill(off, tgt, dn_off, np.empty(mc, np.int32), False))
        put("dn_edge", _down_fill(off, tgt, dn_off, np.empty(mc, np.int32 if mc < 2**31 else np.int64), True))
        put("dn_off", dn_off)
        put("off", off)
        put("tgt", tgt)
        info = {"vertices": n, "arcs": info.get("arcs", 0), "edges": mc, **info,
                "topology_seconds": round(time.perf_counter() - t1, 3),
                "tree_height": int(height.max(initial=0)), "parallel_tasks": int(len(task_off) - 2),
                "top_part": top, "max_up_degree": int(np.diff(off).max(initial=0))}
        if d is None:
            return cls(n, arrays, info)
        del off, tgt, dn_off
        cls._write_meta(d, n, info)
        return cls.load(d, mmap=True)

    # -- storage -------------------------------------------------------------------------------------
    def save(self, directory) -> list[str]:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        names = []
        for name in TOPOLOGY_ARRAYS:
            np.save(d / f"{name}.npy", np.ascontiguousarray(getattr(self, name)))
            names.append(f"{name}.npy")
        self._write_meta(d, self.n, self.info)
        return names + ["cch.json"]

    @staticmethod
    def _write_meta(d: Path, n: int, info: dict) -> None:
        (d / "cch.json").write_text(json.dumps({"format_version": FORMAT_VERSION, "n": n, "info": info}, indent=1))

    @staticmethod
    def files() -> list[str]:
        """The files `save` writes, in its order."""
        return [f"{name}.npy" for name in TOPOLOGY_ARRAYS] + ["cch.json"]

    @classmethod
    def load(cls, directory, mmap: bool = True) -> CCHTopology:
        d = Path(directory)
        meta = json.loads((d / "cch.json").read_text())
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{d}: CCH topology format {meta.get('format_version')}, this code reads {FORMAT_VERSION}")
        arrays = {name: np.load(d / f"{name}.npy", mmap_mode="r" if mmap else None) for name in TOPOLOGY_ARRAYS}
        return cls(meta["n"], arrays, meta.get("info"))

    # -- customisation -------------------------------------------------------------------------------
    def set_base(self, offsets, targets) -> None:
        """Remember the supergraph edges of the arcs of the graph the topology was built from, so that
        `arc_edges` maps any sub-CSR of it (rows in the same order) by one merge walk."""
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        targets = np.ascontiguousarray(targets, dtype=np.int64)
        edge, up = self._find(offsets, targets)
        self._base = (offsets, targets, edge, up)

    def check(self, offsets, targets) -> None:
        """Raise ValueError unless every arc of the CSR graph joins vertices the topology connects (what
        `set_base` checks, without keeping or making its per-arc arrays)."""
        if offsets.shape != (self.n + 1,) or offsets[-1] != targets.shape[0]:
            raise ValueError(f"offsets must be int64[{self.n + 1}] ending at len(targets)")
        if targets.size and (targets.min() < 0 or targets.max() >= self.n):
            raise ValueError("targets out of range")
        bad = _count_unconnected(np.ascontiguousarray(offsets, dtype=np.int64), np.ascontiguousarray(targets),
                                 self.rank, self.off, self.tgt)
        if bad:
            raise ValueError(f"{bad} arc(s) join vertices the topology does not connect")

    def _find(self, offsets, targets):
        if offsets.shape != (self.n + 1,) or offsets[-1] != targets.shape[0]:
            raise ValueError(f"offsets must be int64[{self.n + 1}] ending at len(targets)")
        if targets.size and (targets.min() < 0 or targets.max() >= self.n):
            raise ValueError("targets out of range")
        if self._base is not None:
            bo, bt, be, bu = self._base
            edge, up = _subset_edges(offsets, targets, bo, bt, be, bu)
        else:
            edge, up = _find_edges(offsets, targets, np.asarray(self.rank, np.int64), self.off, self.tgt)
        if (edge == -2).any():
            raise ValueError(f"{int((edge == -2).sum())} arc(s) join vertices the topology does not connect")
        return edge, up

    def arc_edges(self, offsets, targets, *, key=None):
        """(edge int64[m], upward bool[m]) of each arc of a CSR graph over the same vertices; -1 for a self
        loop. Every arc must join two vertices adjacent in the graph the topology was built from (any
        subset of its arcs, in either direction, with any weights). `key`: memoise the mapping (the
        arc arrays of one profile's turn graph are reused by every customisation)."""
        if key is not None and key in self._arc_map:
            return self._arc_map[key]
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        targets = np.ascontiguousarray(targets, dtype=np.int64)
        edge, up = self._find(offsets, targets)
        if key is not None:
            if len(self._arc_map) > 32:
                self._arc_map.clear()
            self._arc_map[key] = (edge, up)
        return edge, up

    @property
    def parent(self):
        """Elimination tree in rank space (parent[r] = lowest upper neighbour of r, -1 for a root)."""
        p = getattr(self, "_parent", None)
        if p is None:
            off = np.asarray(self.off)
            p = np.full(self.n, -1, np.int64)
            has = off[1:] > off[:-1]
            p[has] = np.asarray(self.tgt)[off[:-1][has]]
            self._parent = p
        return p

    def customise(self, offsets, targets, weights, secondary=None, *, parallel: bool = True, key=None,
                  perfect: bool = True, base_index=None) -> CustomisedCH:
        """A `ContractionHierarchy` for the metric `weights` (float64[m], >= 0; inf = arc unusable) and
        `secondary` on the arcs of the CSR graph (offsets, targets). See `arc_edges` for which arcs.
        `perfect` (default): perfect customisation, arcs it proves unneeded pruned, and point-to-point
        queries by elimination-tree walk; False: the basic (lower-triangle) customisation only, queried
        by the bidirectional Dijkstra of `ContractionHierarchy`. `base_index`: each arc's position among
        the arcs given to `set_base` (when the graph is a subset of them, in the same row order): its
        supergraph edge is then read from the base's instead of found by a merge walk."""
        t0 = time.perf_counter()
        weights = np.ascontiguousarray(weights, dtype=np.float64)
        targets = np.asarray(targets)
        secondary = np.zeros_like(weights) if secondary is None else np.ascontiguousarray(secondary, np.float64)
        if weights.shape != targets.shape or secondary.shape != targets.shape:
            raise ValueError("weights and secondary must have the shape of targets")
        if weights.size and (np.isnan(weights).any() or (weights < 0).any()):
            raise ValueError("weights must be >= 0 (inf for an unusable arc)")
        if secondary.size and not np.all(np.isfinite(secondary[np.isfinite(weights)])):
            raise ValueError("secondary must be finite on usable arcs")
        base = self._base
        if (base_index is not None and base is not None and base_index.shape == targets.shape
                and np.array_equal(base[1][base_index], targets)):  # a few ms: the arcs are the base's
            edge, up = base[2][base_index], base[3][base_index]
        else:
            edge, up = self.arc_edges(offsets, targets, key=key)
        mc = self.edges
        bufs = self._take_spare(mc)
        up_w, dn_w, up_s, dn_s, up_m, dn_m, up_c1, up_c2, dn_c1, dn_c2, up_h, dn_h = bufs  # c1/c2 read where m >= 0
        _init_metric(edge, up, weights, secondary, up_w, dn_w, up_s, dn_s)
        args = (self.off, self.tgt, self.dn_off, self.dn_src, self.dn_edge, self.task_off, self.task_verts,
                up_w, dn_w, up_s, dn_s, up_m, dn_m, up_c1, up_c2, dn_c1, dn_c2, up_h, dn_h)
        t1 = time.perf_counter()
        if parallel:
            # one parallel customisation at a time: the threads are the machine's cores anyway, and
            # Numba's fallback threading layer (workqueue) must not be entered from two threads at once
            with _PARALLEL_LOCK:
                _customise_parallel(*args, max(int(numba.get_num_threads()), 1))
        else:
            _customise_serial(*args)
        t2 = time.perf_counter()
        order = np.asarray(self.order, np.int64)
        if perfect:
            up_d = np.zeros(mc, np.bool_)
            dn_d = np.zeros(mc, np.bool_)
            if parallel:
                with _PARALLEL_LOCK:
                    _perfect_parallel(self.off, self.tgt, self.dn_off, self.dn_src, self.dn_edge, self.task_off,
                                      self.task_verts, up_w, dn_w, up_s, dn_s, up_d, dn_d,
                                      max(int(numba.get_num_threads()), 1))
            else:
                _perfect_serial(self.off, self.tgt, self.dn_off, self.dn_src, self.dn_edge, up_w, dn_w, up_s, dn_s,
                                up_d, dn_d)
            _keep_children(self.n, self.off, up_w, dn_w, up_m, dn_m, up_c1, up_c2, dn_c1, dn_c2, up_d, dn_d)
            t3 = time.perf_counter()
            cargs = (self.n, self.off, self.tgt, order, up_w, dn_w, up_s, dn_s, up_m, dn_m, up_c1, up_c2,
                     dn_c1, dn_c2, up_h, dn_h, up_d, dn_d)
            if parallel:
                with _PARALLEL_LOCK:
                    compacted = _compact(*cargs, chunks=_COMPACT_CHUNKS)
            else:
                compacted = _compact(*cargs, chunks=0)
            (U_off, U_tgt, U_row, U_w, U_s, U_mid, U_c1, U_c2, U_h,
             D_off, D_tgt, D_row, D_w, D_s, D_mid, D_c1, D_c2, D_h) = compacted
            shared = ()
            del up_d, dn_d
            self._give_spare(bufs)  # compacted: the working arrays are free for the next customisation
            del bufs, up_w, dn_w, up_s, dn_s, up_m, dn_m, up_c1, up_c2, dn_c1, dn_c2, up_h, dn_h
        else:
            # the basic customisation stays in the supergraph's own layout: its rows, heads and arc
            # numbers are the topology's (memory-mapped, shared), unusable arcs keep weight inf and the
            # queries pass over them; only the middle vertices are mapped to original ids. (Compacting
            # cost about a third of a basic customisation; the perfect one, which replaces it, compacts.)
            t3 = time.perf_counter()
            U_mid, D_mid = up_m, dn_m  # rank -> original id in place (element by element)
            if parallel:
                with _PARALLEL_LOCK:
                    _mid_ids(up_m, dn_m, order, U_mid, D_mid, up_c1, up_c2, dn_c1, dn_c2)
            else:
                _mid_ids_serial(up_m, dn_m, order, U_mid, D_mid, up_c1, up_c2, dn_c1, dn_c2)
            U_off = D_off = self.off
            U_tgt = D_tgt = self.tgt
            U_row = D_row = self.row
            U_w, U_s, U_c1, U_c2, U_h = up_w, up_s, up_c1, up_c2, up_h
            D_w, D_s, D_c1, D_c2, D_h = dn_w, dn_s, dn_c1, dn_c2, dn_h
            shared = ("up_off", "up_tgt", "up_row", "dn_off", "dn_tgt", "dn_row")
        arrays = dict(rank=self.rank, order=self.order,
                      up_off=U_off, up_tgt=U_tgt, up_w=U_w, up_s=U_s, up_mid=U_mid, up_c1=U_c1, up_c2=U_c2,
                      up_row=U_row, up_hops=U_h,
                      dn_off=D_off, dn_tgt=D_tgt, dn_w=D_w, dn_s=D_s, dn_mid=D_mid, dn_c1=D_c1, dn_c2=D_c2,
                      dn_row=D_row, dn_hops=D_h)
        info = {"vertices": self.n, "arcs": int(targets.shape[0]), "up_arcs": int(U_tgt.shape[0]),
                "dn_arcs": int(D_tgt.shape[0]), "cch_edges": int(mc),
                "map_seconds": round(t1 - t0, 4), "customise_seconds": round(t2 - t1, 4),
                "perfect_seconds": round(t3 - t2, 4), "compact_seconds": round(time.perf_counter() - t3, 4),
                "perfect": bool(perfect)}
        ch = CustomisedCH(self.n, arrays, info, parent=self.parent if perfect else None, shared=shared)
        ch._orig_args = (self.n, offsets, targets, weights, secondary)  # `_orig_out`, made when first needed
        return ch

    def _take_spare(self, mc: int) -> tuple:
        """The spare working arrays, reset, or fresh ones."""
        with self._spare_lock:
            spare, self._spare = self._spare, None
        if spare is None or spare[0].shape[0] != mc:
            return _new_buffers(mc)
        self.spare_hits += 1
        return _reset_buffers(spare)

    def _give_spare(self, bufs: tuple) -> None:
        if not self.keep_spare:
            return
        with self._spare_lock:
            self._spare = bufs

    def warmup(self) -> None:
        """Load the customisation kernels from Numba's cache now."""
        if not self.n:
            return
        # on a four-vertex topology whose arrays have this one's dtypes and write flags (so the same
        # compiled specialisations load): warming on the real one ran every kernel over all its edges
        # (seconds and about 0.7 GB of temporaries per pass at 64 copies of Liechtenstein)
        off = np.array([0, 1, 3, 5, 6], np.int64)
        tgt = np.array([1, 0, 2, 1, 3, 2], np.int64)
        small = CCHTopology.build(4, off, tgt, rank=np.arange(4))
        arrays = {}
        for name in TOPOLOGY_ARRAYS:
            a = np.array(getattr(small, name), dtype=getattr(self, name).dtype)
            a.setflags(write=bool(getattr(self, name).flags.writeable))
            arrays[name] = a
        small = CCHTopology(4, arrays, small.info)
        small.set_base(off, tgt)
        w = np.ones(len(tgt))
        # what a new metric runs: the basic customisation on both cores, then the perfect one on one
        # core in the background (routing.customise.Customiser.customise_soon)
        small.customise(off, tgt, w, w, perfect=False).warmup()
        small.customise(off, tgt, w, w, parallel=False).warmup()


def _original_out(n, offsets, targets, weights, secondary):
    """(off, head, w, s) of the usable original arcs by tail, self loops left out (for force_loop
    queries)."""
    tail = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    keep = np.isfinite(weights) & (tail != targets)
    if keep.all():
        return offsets, targets, weights, secondary
    tail = tail[keep]
    off = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(tail, minlength=n), out=off[1:])
    return off, targets[keep], weights[keep], secondary[keep]
