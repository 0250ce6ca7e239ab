"""The road arms at the junctions a route passes: one Numba kernel over the graph's CSR arrays.

`junction_arms` gives, for pairs of consecutive route edges (the edge in, the edge out), every road arm at
the node where they meet: its bearing, whether the costing may leave through it, and the positions of the
route's own arms. The OSRM dialect's step intersections are made from it (services/osrm_steps.py); it is
here, beside the narrative's other kernels, because it reads only graph arrays (no request, no document).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def junction_arms(offsets, out_edges, bearing_start, usable, has_usable, edge_src, e_in, e_out, before, after,
                  junctions_only):
    """Every road arm at the node where edge e_in[q] ends and e_out[q] starts, for each q: bearings
    leaving the node (the edge's start bearing rounded half to even, mod 360; the route's own way out
    takes after[q] and its way back in (before[q] + 180) % 360 when those are >= 0), sorted stably;
    `entry` = the costing may leave through the arm and it is not the way back; the positions of the
    way back (`i_in`) and the way out (`i_out`) in the sorted arms, -1 when the edges do not meet.
    `junctions_only`: nodes with two arms or fewer (bends) get none. Rows of q: start[q]:start[q + 1]."""
    n = e_in.shape[0]
    start = np.zeros(n + 1, np.int64)
    for q in range(n):
        v = edge_src[e_out[q]]
        deg = offsets[v + 1] - offsets[v]
        start[q + 1] = start[q] + (0 if junctions_only and deg <= 2 else deg)
    bear = np.empty(start[n], np.int64)
    arm = np.empty(start[n], np.int64)
    entry = np.empty(start[n], np.bool_)
    i_in = np.full(n, -1, np.int64)
    i_out = np.full(n, -1, np.int64)
    for q in range(n):
        s, t = start[q], start[q + 1]
        if s == t:
            continue
        o = offsets[edge_src[e_out[q]]]
        back, out = e_in[q] ^ 1, e_out[q]
        for k in range(t - s):
            a = out_edges[o + k]
            x = np.float64(bearing_start[a])
            f = np.floor(x)
            d = x - f
            r = f + 1.0 if d > 0.5 or (d == 0.5 and f % 2.0 != 0.0) else f  # numpy's round: half to even
            b = np.int64(r) % 360
            if after[q] >= 0 and a == out:
                b = after[q]
            if before[q] >= 0 and a == back:
                b = (before[q] + 180) % 360
            p = s + k
            while p > s and bear[p - 1] > b:  # insertion: equal bearings keep their order (a stable sort)
                bear[p] = bear[p - 1]
                arm[p] = arm[p - 1]
                p -= 1
            bear[p] = b
            arm[p] = a
        for p in range(s, t):
            a = arm[p]
            entry[p] = (usable[a] if has_usable else True) and a != back
            if a == back and i_in[q] < 0:
                i_in[q] = p - s
            if a == out and i_out[q] < 0:
                i_out[q] = p - s
    return start, bear, entry, i_in, i_out


_NO_USABLE = np.zeros(1, np.bool_)


def arms_table(graph, usable, e_in, e_out, before, after, junctions_only: bool):
    """`junction_arms` for these edge pairs: (start, bearings, entry, i_in, i_out) as arrays."""
    has = usable is not None
    return junction_arms(
        graph.node_out_offsets, graph.node_out_edges, graph.edge_bearing_start,
        np.ascontiguousarray(usable, np.bool_) if has else _NO_USABLE, has, graph.edge_src,
        np.ascontiguousarray(e_in, np.int64), np.ascontiguousarray(e_out, np.int64),
        np.ascontiguousarray(before, np.int64), np.ascontiguousarray(after, np.int64), junctions_only)


def met(start, i_in, i_out) -> np.ndarray:
    """The rows of an `arms_table` with arms where the two edges meet."""
    return np.flatnonzero((start[1:] > start[:-1]) & (i_in >= 0) & (i_out >= 0))
