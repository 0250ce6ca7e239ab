"""Which features GEOS's topology-preserving simplification leaves unchanged, without asking GEOS.

`shapely.simplify(g, tol, preserve_topology=True)` (GEOS's TopologyPreservingSimplifier) runs
Douglas-Peucker on every line and ring: a section i..j is flattened only when its furthest vertex lies
within `tol` of the segment p[i]p[j] (and the topology checks allow it; they can only refuse), else it is
split at that vertex (the first of equal distances) and both halves are tried; a ring's start vertex is
then dropped when it lies within `tol` of the segment joining its neighbours. So a geometry comes back
unchanged when every section of the full recursion tree (split down to single segments) has its furthest
vertex farther than `tol`, and so does a ring's start vertex. `floors` computes, per geometry, the
smallest of those distances: at any tolerance below it (with a margin for rounding), simplification is
the identity and the tiler keeps the geometry as it is. Most features at the high zooms (buildings, short
ways) are such, and GEOS's simplifier costs tens of microseconds each (it builds segment indexes per
geometry); this kernel does the test once per feature and partition, for every zoom.

Where two vertices of a section are nearly equally far (so GEOS's choice of split could differ from
this kernel's by a rounding), the floor is 0: the geometry always goes to GEOS.
"""

from __future__ import annotations

import numba
import numpy as np
import shapely

from geoengine.tiles import mvt

MARGIN = 1e-9  # relative: a tolerance within this of a floor goes to GEOS
WORK = 64  # distances per vertex a line or ring may cost (a full Douglas-Peucker tree is O(n log n) on
# real shapes but O(n^2) on some): past it, the floor is 0 and GEOS simplifies the feature


@numba.njit(cache=True, nogil=True)
def _seg_dist(px, py, ax, ay, bx, by):
    """GEOS's Distance::pointToSegment, in the same operations."""
    if ax == bx and ay == by:
        return np.hypot(px - ax, py - ay)
    dx = bx - ax
    dy = by - ay
    r = ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)
    if r <= 0.0:
        return np.hypot(px - ax, py - ay)
    if r >= 1.0:
        return np.hypot(px - bx, py - by)
    s = ((ay - py) * dx - (ax - px) * dy) / (dx * dx + dy * dy)
    return abs(s) * np.sqrt(dx * dx + dy * dy)


@numba.njit(cache=True, nogil=True)
def _component_floor(coords, s, e, stack, stop):
    """The floor of one line or ring; anything below `stop` (the smallest tolerance asked) returns at
    once, and so does a ring whose tree costs more than WORK distances per vertex (as 0: GEOS decides)."""
    n = e - s
    if n <= 2:
        return np.inf
    budget = WORK * n
    floor = np.inf
    top = 0
    stack[0, 0] = 0
    stack[0, 1] = n - 1
    top = 1
    while top > 0:
        top -= 1
        i = stack[top, 0]
        j = stack[top, 1]
        if j <= i + 1:
            continue
        ax, ay = coords[s + i, 0], coords[s + i, 1]
        bx, by = coords[s + j, 0], coords[s + j, 1]
        best = -1.0
        second = -1.0
        k_best = i
        budget -= j - i - 1
        if budget < 0:
            return 0.0
        for k in range(i + 1, j):
            d = _seg_dist(coords[s + k, 0], coords[s + k, 1], ax, ay, bx, by)
            if d > best:
                second = best
                best = d
                k_best = k
            elif d > second:
                second = d
        if second >= 0.0 and best - second <= MARGIN * best:
            return 0.0  # a near tie: GEOS might split elsewhere
        if best < floor:
            floor = best
            if floor < stop:
                return floor
        stack[top, 0] = i
        stack[top, 1] = k_best
        stack[top + 1, 0] = k_best
        stack[top + 1, 1] = j
        top += 2
    if n >= 4 and coords[s, 0] == coords[e - 1, 0] and coords[s, 1] == coords[e - 1, 1]:
        d = _seg_dist(coords[s, 0], coords[s, 1], coords[e - 2, 0], coords[e - 2, 1], coords[s + 1, 0],
                      coords[s + 1, 1])
        if d < floor:
            floor = d
    return floor


@numba.njit(cache=True, nogil=True)
def _floors(coords, comp_off, owner, n_geoms, stop):
    out = np.full(n_geoms, np.inf)
    stack = np.empty((max(len(coords), 2) + 2, 2), dtype=np.int64)
    for c in range(len(comp_off) - 1):
        if out[owner[c]] < stop:
            continue  # another part of this geometry is already below every tolerance
        f = _component_floor(coords, comp_off[c], comp_off[c + 1], stack, stop)
        g = owner[c]
        if f < out[g]:
            out[g] = f
    return out


def floors(geoms: np.ndarray, dims: np.ndarray, stop: float = 0.0) -> np.ndarray:
    """Per geometry (object array, with its shapely dimensions): the tolerance below which GEOS's
    topology-preserving simplification returns it unchanged (inf for points). A floor below `stop`
    (the smallest tolerance that will be asked) may be returned as any value below it: the work on
    that geometry stops there."""
    n = len(geoms)
    out = np.full(n, np.inf)
    sel = np.flatnonzero(dims >= 1)
    if len(sel) == 0:
        return out
    g = geoms[sel]
    tid = shapely.get_type_id(g)
    if ((tid != 1) & (tid != 2) & (tid != 3) & (tid != 5) & (tid != 6)).any():
        parts, pidx = shapely.get_parts(g, return_index=True)
        comps_a, owner, _n_lines = _components(parts, pidx)
        owner = owner.astype(np.int64)
        counts = shapely.get_num_coordinates(comps_a)
        coords = shapely.get_coordinates(comps_a)
    else:
        # the same components in the same order without taking the geometries apart: the lines of the
        # linear geometries, then the rings of the polygons (mvt._ragged)
        coords_l, owners, counts_l = [], [], []
        for dim in (1, 2):
            rows = np.flatnonzero((tid == 1) | (tid == 2) | (tid == 5) if dim == 1 else (tid == 3) | (tid == 6))
            if len(rows) == 0:
                continue
            c, offs = mvt._ragged(g[rows], dim)
            part_geom = np.repeat(rows, np.diff(offs[-1]))
            comp_geom = part_geom if dim == 1 else np.repeat(part_geom, np.diff(offs[1]))
            coords_l.append(c)
            owners.append(comp_geom)
            counts_l.append(np.diff(offs[0]))
        coords = np.concatenate(coords_l)
        owner = np.concatenate(owners).astype(np.int64)
        counts = np.concatenate(counts_l)
    comp_off = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=comp_off[1:])
    coords = np.ascontiguousarray(coords, dtype=np.float64)
    out[sel] = _floors(coords, comp_off, owner, len(sel), float(stop))
    return out


def _components(parts: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The lines among `parts` as they are, then the polygons' rings (shell, then holes), with the id
    (`ids`) of the part each comes from, and how many lines lead."""
    poly = shapely.get_type_id(parts) == 3
    comps, owners = [parts[~poly]], [ids[~poly]]
    if poly.any():
        rings, ridx = shapely.get_rings(parts[poly], return_index=True)
        comps.append(rings)
        owners.append(ids[poly][ridx])
    return np.concatenate(comps), np.concatenate(owners), int((~poly).sum())


def unchanged(floor: np.ndarray, tol: float) -> np.ndarray:
    """Which geometries simplification at `tol` certainly leaves as they are."""
    return tol < floor * (1.0 - MARGIN)


# --- GEOS's topology-preserving simplification, computed here where it provably refuses nothing ---------
#
# GEOS (TaggedLinesSimplifier, 3.12+) simplifies the lines and rings of one geometry in order, each by a
# recursive Douglas-Peucker: a section i..j is flattened to p[i]p[j] when its furthest vertex (the first of
# equal distances, Distance::pointToSegment) is within the tolerance, the line keeps its minimum size
# (4 points for a closed line, 2 else: while fewer points are in the result, a section at recursion depth d
# is flattened only when d + 1 reaches it) and the topology checks allow it; otherwise it is split at that
# vertex, the left half first. A ring's start vertex is then dropped when the result has more than 4
# points, it lies within the tolerance of the segment joining its neighbours, and the checks allow it.
# The checks only refuse: a flattened segment (or the ring's joining segment) that meets any segment of
# the input (outside its own section) or of the output anywhere but at a shared endpoint, or whose
# section's box holds another line's "component point" (its first result vertex, or its second input
# vertex before it is simplified) that the flattening would jump over.
#
# `preserve_topology` runs the same recursion in the same floating-point operations without the checks,
# then proves them unable to refuse: every flattened segment (and joining segment) is tested against EVERY
# input segment outside its section and every other output segment (a superset of what GEOS's indexes
# hold at that moment) with orientation tests whose sign is certain (error bound far above rounding), and
# no other line's first, second or new start vertex may lie in the section's box. Where a test is not
# certain, the geometry goes to GEOS. So the kernel's result is GEOS's, vertex for vertex.

ORIENT_EPS = 1e-12  # relative error bound of a certain orientation sign (Shewchuk's is 3.3e-16)


@numba.njit(cache=True, nogil=True, inline="always")
def _pt_dist(px, py, ax, ay):
    dx = px - ax
    dy = py - ay
    return np.sqrt(dx * dx + dy * dy)


@numba.njit(cache=True, nogil=True)
def _geos_seg_dist(px, py, ax, ay, bx, by):
    """Distance::pointToSegment, operation for operation."""
    if ax == bx and ay == by:
        return _pt_dist(px, py, ax, ay)
    r = ((px - ax) * (bx - ax) + (py - ay) * (by - ay)) / ((bx - ax) * (bx - ax) + (by - ay) * (by - ay))
    if r <= 0.0:
        return _pt_dist(px, py, ax, ay)
    if r >= 1.0:
        return _pt_dist(px, py, bx, by)
    s = ((ay - py) * (bx - ax) - (ax - px) * (by - ay)) / ((bx - ax) * (bx - ax) + (by - ay) * (by - ay))
    return abs(s) * np.sqrt((bx - ax) * (bx - ax) + (by - ay) * (by - ay))


@numba.njit(cache=True, nogil=True, inline="always")
def _orient(px, py, qx, qy, rx, ry):
    """The side of r from the line p->q: +1 / -1 when certain, 0 when collinear or too close to tell."""
    left = (qx - px) * (ry - py)
    right = (qy - py) * (rx - px)
    det = left - right
    bound = ORIENT_EPS * (abs(left) + abs(right))
    if det > bound:
        return 1
    if det < -bound:
        return -1
    return 0


@numba.njit(cache=True, nogil=True)
def _apart(ax, ay, bx, by, cx, cy, dx, dy):
    """Certainly no point in common between segments ab and cd but a shared endpoint (the only contact
    GEOS's hasInvalidIntersection allows)."""
    oc = _orient(ax, ay, bx, by, cx, cy)
    od = _orient(ax, ay, bx, by, dx, dy)
    if oc != 0 and oc == od:
        return True
    oa = _orient(cx, cy, dx, dy, ax, ay)
    ob = _orient(cx, cy, dx, dy, bx, by)
    if oa != 0 and oa == ob:
        return True
    c_shared = (cx == ax and cy == ay) or (cx == bx and cy == by)
    d_shared = (dx == ax and dy == ay) or (dx == bx and dy == by)
    if c_shared and not d_shared:
        return od != 0  # d off the line ab: the segments meet only at c
    if d_shared and not c_shared:
        return oc != 0
    return False


@numba.njit(cache=True, nogil=True)
def _dp_component(coords, s, n, min_size, tol, stack, rs_i, rs_j, r0):
    """GEOS's simplifySection recursion over one line or ring (n points from s), without the topology
    checks. Appends the result segments (relative vertex indices) at rs_i/rs_j[r0:], returns their count,
    or -1 when a distance is not a number."""
    nres = 0
    stack[0, 0] = 0
    stack[0, 1] = n - 1
    stack[0, 2] = 0
    top = 1
    while top > 0:
        top -= 1
        i = stack[top, 0]
        j = stack[top, 1]
        depth = stack[top, 2] + 1
        if i + 1 == j:
            rs_i[r0 + nres] = i
            rs_j[r0 + nres] = j
            nres += 1
            continue
        valid = True
        size = 0 if nres == 0 else nres + 1
        if size < min_size and depth + 1 < min_size:
            valid = False
        ax, ay = coords[s + i, 0], coords[s + i, 1]
        bx, by = coords[s + j, 0], coords[s + j, 1]
        best = -1.0
        k_best = i
        for k in range(i + 1, j):
            d = _geos_seg_dist(coords[s + k, 0], coords[s + k, 1], ax, ay, bx, by)
            if d > best:
                best = d
                k_best = k
        if best < 0.0:
            return -1
        if best > tol:
            valid = False
        if valid:
            rs_i[r0 + nres] = i
            rs_j[r0 + nres] = j
            nres += 1
            continue
        stack[top, 0] = k_best  # the right half, processed after the left
        stack[top, 1] = j
        stack[top, 2] = depth
        stack[top + 1, 0] = i
        stack[top + 1, 1] = k_best
        stack[top + 1, 2] = depth
        top += 2
    return nres


@numba.njit(cache=True, nogil=True)
def _in_box(px, py, x0, y0, x1, y1):
    return x0 <= px <= x1 and y0 <= py <= y1


SORTED = 32  # input segments of a geometry past which they are sorted for the overlap scan
CHECKS = 64  # candidate pairs per segment the proof may cost; past it the geometry goes to GEOS


@numba.njit(cache=True, nogil=True)
def _harmless(coords, comp_off, c0, nc, rs_i, rs_j, rs_off, dropped, ns, n_in, sx0, sx1, sy0, sy1, s_a, s_b,
              s_comp, s_lo, s_out, cand, cand_comp):
    """Every output segment that replaced more than one input segment (entries n_in..ns) certainly meets
    no input segment outside what it replaced and no other output segment but at a shared end, and no
    other line's component point lies in the box of what it replaced."""
    for q in range(ns):
        ax, ay = coords[s_a[q], 0], coords[s_a[q], 1]
        bx, by = coords[s_b[q], 0], coords[s_b[q], 1]
        sx0[q] = min(ax, bx)
        sx1[q] = max(ax, bx)
        sy0[q] = min(ay, by)
        sy1[q] = max(ay, by)
    width = 0.0  # of the widest input segment
    for q in range(n_in):
        if sx1[q] - sx0[q] > width:
            width = sx1[q] - sx0[q]
    sort = n_in > SORTED
    budget = CHECKS * ns + 4096  # candidate pairs the proof may look at
    if sort:
        order = np.argsort(sx0[:n_in], kind="mergesort")  # (numba's quicksort degrades on sorted runs)
        xs = sx0[:n_in][order]
    else:
        order = np.empty(0, dtype=np.int64)
        xs = sx0[:0]
    ncand = 0
    if nc > 1:
        for ci in range(nc):
            s = comp_off[c0 + ci]
            cand[ncand, 0], cand[ncand, 1] = coords[s, 0], coords[s, 1]
            cand_comp[ncand] = ci
            cand[ncand + 1, 0], cand[ncand + 1, 1] = coords[s + 1, 0], coords[s + 1, 1]
            cand_comp[ncand + 1] = ci
            ncand += 2
            if dropped[ci]:
                v = s + rs_i[rs_off[ci + 1] - 1]
                cand[ncand, 0], cand[ncand, 1] = coords[v, 0], coords[v, 1]
                cand_comp[ncand] = ci
                ncand += 1
    for q in range(n_in, ns):
        ci = s_comp[q]
        s = comp_off[c0 + ci]
        ax, ay = coords[s_a[q], 0], coords[s_a[q], 1]
        bx, by = coords[s_b[q], 0], coords[s_b[q], 1]
        # the input segments it replaces (not tested), and the box of what it replaces
        bx0, by0, bx1, by1 = np.inf, np.inf, -np.inf, -np.inf
        if s_out[q] >= 0:
            t = s_out[q]
            lo1, hi1, lo2, hi2 = rs_i[t], rs_j[t], 0, 0
            for v in range(s + lo1, s + hi1 + 1):
                bx0, by0 = min(bx0, coords[v, 0]), min(by0, coords[v, 1])
                bx1, by1 = max(bx1, coords[v, 0]), max(by1, coords[v, 1])
        else:  # the joining segment: GEOS boxes the first and last result segments
            t0, t1 = rs_off[ci], rs_off[ci + 1] - 1
            lo1, hi1, lo2, hi2 = rs_i[t0], rs_j[t0], rs_i[t1], rs_j[t1]
            for v in (s + lo1, s + hi1, s + lo2, s + hi2):
                bx0, by0 = min(bx0, coords[v, 0]), min(by0, coords[v, 1])
                bx1, by1 = max(bx1, coords[v, 0]), max(by1, coords[v, 1])
        for u in range(ncand):
            if cand_comp[u] != ci and _in_box(cand[u, 0], cand[u, 1], bx0, by0, bx1, by1):
                return False
        fx0, fx1 = sx0[q], sx1[q]
        fy0, fy1 = sy0[q], sy1[q]
        if sort:
            # (a margin over the roundings of the width and of the subtraction)
            lo = np.searchsorted(xs, fx0 - width * 1.001 - abs(fx0) * 1e-12, side="left")
            hi = np.searchsorted(xs, fx1, side="right")
        else:
            lo, hi = 0, n_in
        budget -= hi - lo + ns - n_in
        if budget < 0:
            return False  # too many candidates (a long segment widens the window): GEOS's index decides
        for w in range(lo, hi + ns - n_in):  # the input segments in the window, then every output segment
            if w < hi:
                o = order[w] if sort else w
            else:
                o = n_in + w - hi
            if o == q or sx1[o] < fx0 or sx0[o] > fx1 or sy1[o] < fy0 or sy0[o] > fy1:
                continue
            if s_comp[o] == ci:
                if s_lo[o] >= 0 and (lo1 <= s_lo[o] < hi1 or (s_out[q] == -2 and lo2 <= s_lo[o] < hi2)):
                    continue  # replaced by this segment (GEOS excludes it or has removed it)
                if s_out[q] == -2 and (s_out[o] == rs_off[ci] or s_out[o] == rs_off[ci + 1] - 1):
                    continue  # the replaced first/last result segments (they meet it at an end)
            if not _apart(ax, ay, bx, by, coords[s_a[o], 0], coords[s_a[o], 1], coords[s_b[o], 0],
                          coords[s_b[o], 1]):
                return False
    return True


@numba.njit(cache=True, nogil=True)
def _preserve_topology(coords, comp_off, comp_ring, geom_comp, tol, out_idx, out_n):
    """Per geometry (components geom_comp[g]..geom_comp[g+1]): True when its GEOS result is proven and
    written (per component c, out_n[c] vertex indices into coords at out_idx[comp_off[c]:])."""
    n_geoms = len(geom_comp) - 1
    ok = np.zeros(n_geoms, dtype=np.bool_)
    big = 2
    for g in range(n_geoms):
        m = comp_off[geom_comp[g + 1]] - comp_off[geom_comp[g]]
        if m > big:
            big = m
    stack = np.empty((big + 2, 3), dtype=np.int64)
    rs_i = np.empty(big, dtype=np.int64)  # result segments of the geometry's components, relative indices
    rs_j = np.empty(big, dtype=np.int64)
    rs_off = np.empty(big + 1, dtype=np.int64)  # per component of the geometry
    dropped = np.zeros(big, dtype=np.bool_)  # a ring's start vertex removed
    # segments to test against: input segments and output (flattened or joining) segments
    sx0 = np.empty(2 * big, dtype=np.float64)
    sx1 = np.empty(2 * big, dtype=np.float64)
    sy0 = np.empty(2 * big, dtype=np.float64)
    sy1 = np.empty(2 * big, dtype=np.float64)
    s_a = np.empty(2 * big, dtype=np.int64)  # absolute vertex indices of the ends
    s_b = np.empty(2 * big, dtype=np.int64)
    s_comp = np.empty(2 * big, dtype=np.int64)
    s_lo = np.empty(2 * big, dtype=np.int64)  # input segment index within its component, or -1 (output)
    s_out = np.empty(2 * big, dtype=np.int64)  # output segment id (index into rs), or -1 (input)
    cand = np.empty((3 * big, 2), dtype=np.float64)  # component points another line's flattening may jump
    cand_comp = np.empty(3 * big, dtype=np.int64)
    for g in range(n_geoms):
        c0, c1 = geom_comp[g], geom_comp[g + 1]
        nc = c1 - c0
        good = True
        r = 0
        for ci in range(nc):
            c = c0 + ci
            s, e = comp_off[c], comp_off[c + 1]
            n = e - s
            rs_off[ci] = r
            dropped[ci] = False
            if n < 2:
                good = False
                break
            closed = coords[s, 0] == coords[e - 1, 0] and coords[s, 1] == coords[e - 1, 1]
            min_size = 4 if closed else 2
            k = _dp_component(coords, s, n, min_size, tol, stack, rs_i, rs_j, r)
            if k < 0:
                good = False
                break
            if comp_ring[c] and closed and n >= 4 and k + 1 > min_size:
                fi, lj = r, r + k - 1
                d = _geos_seg_dist(coords[s, 0], coords[s, 1], coords[s + rs_i[lj], 0], coords[s + rs_i[lj], 1],
                                   coords[s + rs_j[fi], 0], coords[s + rs_j[fi], 1])
                if d <= tol:
                    dropped[ci] = True
            if comp_ring[c] and (k + 1 - (1 if dropped[ci] else 0)) < 4:
                good = False  # (cannot happen: the minimum size) a ring GEOS would turn into a line
                break
            r += k
        if not good:
            continue
        rs_off[nc] = r
        # the segments to test against: the input's (sorted by their left end when many), then the output's
        ns = 0
        for ci in range(nc):
            c = c0 + ci
            s, e = comp_off[c], comp_off[c + 1]
            for q in range(e - s - 1):
                s_a[ns] = s + q
                s_b[ns] = s + q + 1
                s_comp[ns] = ci
                s_lo[ns] = q
                s_out[ns] = -1
                ns += 1
        n_in = ns
        for ci in range(nc):
            c = c0 + ci
            s = comp_off[c]
            for t in range(rs_off[ci], rs_off[ci + 1]):
                if rs_j[t] > rs_i[t] + 1:
                    s_a[ns] = s + rs_i[t]
                    s_b[ns] = s + rs_j[t]
                    s_comp[ns] = ci
                    s_lo[ns] = -1
                    s_out[ns] = t
                    ns += 1
            if dropped[ci]:  # the joining segment last.p0 -> first.p1
                s_a[ns] = s + rs_i[rs_off[ci + 1] - 1]
                s_b[ns] = s + rs_j[rs_off[ci]]
                s_comp[ns] = ci
                s_lo[ns] = -1
                s_out[ns] = -2
                ns += 1
        if ns > n_in:  # something was flattened: prove it harmless
            good = _harmless(coords, comp_off, c0, nc, rs_i, rs_j, rs_off, dropped, ns, n_in, sx0, sx1, sy0, sy1,
                             s_a, s_b, s_comp, s_lo, s_out, cand, cand_comp)
        if not good:
            continue
        ok[g] = True
        for ci in range(nc):
            c = c0 + ci
            s = comp_off[c]
            a, b = rs_off[ci], rs_off[ci + 1]
            w = s
            if dropped[ci]:
                out_idx[w] = s + rs_i[b - 1]
                w += 1
                for t in range(a + 1, b - 1):
                    out_idx[w] = s + rs_i[t]
                    w += 1
                out_idx[w] = s + rs_i[b - 1]
                w += 1
            else:
                for t in range(a, b):
                    out_idx[w] = s + rs_i[t]
                    w += 1
                out_idx[w] = s + rs_j[b - 1]
                w += 1
            out_n[c] = w - s
    return ok


def _ordered_components(g: np.ndarray, tid: np.ndarray):
    """The lines and rings of geometries `g` (lines, polygons and their multi-geometries; `tid` their
    type ids) in GEOS's order (per geometry, per part, the shell then the holes): coordinates, each
    component's coordinate count, whether it is a ring, its part's index and its geometry's. One
    `get_coordinates` over the geometries themselves; only multi-geometries and polygons with holes are
    taken apart to count their components (`_ordered_components_parts` takes all apart)."""
    n_coords = shapely.get_num_coordinates(g)
    simple = (tid == 1) | (tid == 3)
    poly = np.flatnonzero(tid == 3)
    if len(poly):
        simple[poly] = shapely.get_num_interior_rings(g[poly]) == 0
    if (n_coords[simple] == 0).any():
        return _ordered_components_parts(g)
    coords = shapely.get_coordinates(g)
    other = np.flatnonzero(~simple)
    if len(other) == 0:
        idx = np.arange(len(g))
        return coords, n_coords, tid == 3, idx, idx
    n_parts = np.ones(len(g), dtype=np.int64)
    n_parts[other] = shapely.get_num_geometries(g[other])
    parts = shapely.get_parts(g[other])
    slot_other = np.repeat(~simple, n_parts)
    part_geom = np.repeat(np.arange(len(g)), n_parts)
    part_poly = np.repeat(tid == 3, n_parts)  # a simple geometry's one part
    ptid = shapely.get_type_id(parts)
    part_poly[slot_other] = ptid == 3
    n_comps = np.ones(len(part_geom), dtype=np.int64)
    n_comps[slot_other] = np.where(ptid == 3, shapely.get_num_interior_rings(parts) + 1, 1)
    comp_part = np.repeat(np.arange(len(part_geom)), n_comps)
    comp_other = slot_other[comp_part]
    counts = np.empty(len(comp_part), dtype=np.int64)
    counts[~comp_other] = n_coords[simple]
    comps = np.empty(int(n_comps[slot_other].sum()), dtype=object)
    is_poly = np.repeat(ptid == 3, n_comps[slot_other])
    comps[~is_poly] = parts[ptid != 3]
    comps[is_poly] = shapely.get_rings(parts[ptid == 3])
    counts[comp_other] = shapely.get_num_coordinates(comps)
    return coords, counts, part_poly[comp_part], comp_part, part_geom[comp_part]


def _ordered_components_parts(g: np.ndarray):
    """`_ordered_components` by taking every geometry apart (the reference it is tested against)."""
    parts, pidx = shapely.get_parts(g, return_index=True)
    comps_a, comp_part, n_lines = _components(parts, np.arange(len(parts)))
    order = np.argsort(comp_part, kind="stable")
    comp_ring = (np.arange(len(comps_a)) >= n_lines)[order]
    comps_a = comps_a[order]
    comp_part = comp_part[order]
    return (shapely.get_coordinates(comps_a), shapely.get_num_coordinates(comps_a), comp_ring, comp_part,
            pidx[comp_part])


def preserve_topology(geoms: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """`shapely.simplify(geoms, tol, preserve_topology=True)` where it is proven (see above): returns the
    simplified geometries (object array, None where not proven) and the mask of those proven. Lines,
    polygons and their multi-geometries in two dimensions are tried; anything else is left to GEOS."""
    n = len(geoms)
    out = np.full(n, None, dtype=object)
    done = np.zeros(n, dtype=bool)
    if n == 0:
        return out, done
    tid = shapely.get_type_id(geoms)
    sel = np.flatnonzero(((tid == 1) | (tid == 3) | (tid == 5) | (tid == 6)) & ~shapely.is_empty(geoms)
                        & ~shapely.has_z(geoms))
    if len(sel) == 0:
        return out, done
    g = geoms[sel]
    coords, counts, comp_ring, comp_part, comp_geom = _ordered_components(g, tid[sel])
    comp_off = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=comp_off[1:])
    geom_comp = np.zeros(len(g) + 1, dtype=np.int64)
    np.cumsum(np.bincount(comp_geom, minlength=len(g)), out=geom_comp[1:])
    coords = np.ascontiguousarray(coords, dtype=np.float64)
    out_idx = np.empty(len(coords), dtype=np.int64)
    out_n = np.zeros(len(counts), dtype=np.int64)
    ok = _preserve_topology(coords, comp_off, comp_ring, geom_comp, float(tol), out_idx, out_n)
    if not ok.any():
        return out, done
    gtid = tid[sel].copy()
    # GEOS builds a multi-geometry of one part as that part (GeometryFactory::buildGeometry)
    single = shapely.get_num_geometries(g) == 1
    gtid[single & (gtid == 5)] = 1
    gtid[single & (gtid == 6)] = 3
    cok = ok[comp_geom]
    for t in (1, 3, 5, 6):
        gm = ok & (gtid == t)
        if not gm.any():
            continue
        cm = cok & (gtid[comp_geom] == t)
        cn = out_n[cm]
        starts = comp_off[:-1][cm]
        idx = np.repeat(starts - np.cumsum(np.concatenate([[0], cn[:-1]])), cn) + np.arange(int(cn.sum()))
        xy = coords[out_idx[idx]]
        coff = np.concatenate([[0], np.cumsum(cn)])
        if t == 1:
            res = shapely.from_ragged_array(shapely.GeometryType.LINESTRING, xy, (coff,))
        elif t == 5:
            goff = np.concatenate([[0], np.cumsum(np.bincount(comp_geom[cm], minlength=len(g))[gm])])
            res = shapely.from_ragged_array(shapely.GeometryType.MULTILINESTRING, xy, (coff, goff))
        else:
            cp = comp_part[cm]  # rings per part, parts per geometry (in order)
            first = np.concatenate([[True], cp[1:] != cp[:-1]])
            rings_per_part = np.diff(np.concatenate([np.flatnonzero(first), [len(cp)]]))
            roff = np.concatenate([[0], np.cumsum(rings_per_part)])
            if t == 3:
                res = shapely.from_ragged_array(shapely.GeometryType.POLYGON, xy, (coff, roff))
            else:
                part_geom = comp_geom[cm][first]
                poff = np.concatenate([[0], np.cumsum(np.bincount(part_geom, minlength=len(g))[gm])])
                res = shapely.from_ragged_array(shapely.GeometryType.MULTIPOLYGON, xy, (coff, roff, poff))
        out[sel[gm]] = res
        done[sel[gm]] = True
    return out, done


def warm() -> None:
    """Load (or compile) the kernel in this process, before the tile pools fork."""
    g = np.array([shapely.LineString([(0, 0), (1, 1), (2, 0)])], dtype=object)
    floors(g, np.array([1]))
    preserve_topology(g, 0.5)
