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
    parts, pidx = shapely.get_parts(geoms[sel], return_index=True)
    poly = shapely.get_type_id(parts) == 3
    comps = [parts[~poly]]
    owners = [pidx[~poly]]
    if poly.any():
        rings, ridx = shapely.get_rings(parts[poly], return_index=True)
        comps.append(rings)
        owners.append(pidx[poly][ridx])
    comps_a = np.concatenate(comps)
    owner = np.concatenate(owners).astype(np.int64)
    counts = shapely.get_num_coordinates(comps_a)
    comp_off = np.zeros(len(comps_a) + 1, dtype=np.int64)
    np.cumsum(counts, out=comp_off[1:])
    coords = np.ascontiguousarray(shapely.get_coordinates(comps_a), dtype=np.float64)
    out[sel] = _floors(coords, comp_off, owner, len(sel), float(stop))
    return out


def unchanged(floor: np.ndarray, tol: float) -> np.ndarray:
    """Which geometries simplification at `tol` certainly leaves as they are."""
    return tol < floor * (1.0 - MARGIN)


def warm() -> None:
    """Load (or compile) the kernel in this process, before the tile pools fork."""
    floors(np.array([shapely.LineString([(0, 0), (1, 1), (2, 0)])], dtype=object), np.array([1]))
