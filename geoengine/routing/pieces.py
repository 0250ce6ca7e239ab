"""Pieces of a path: the directed edges between two consecutive locations, with the positions on the
end edges (`Leg`), and their geometry (one Numba call over the graph's shape arrays).

Arrays in, arrays out: the services layer turns pieces into typed routes (geoengine.services.route).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np

from geoengine.geo import haversine_scalar


@dataclass
class Leg:
    """One piece between two consecutive locations: directed edges and positions on the end edges."""

    edges: np.ndarray
    f_first: float
    f_last: float
    cost: float
    time_s: float
    length_m: float
    src_index: int = 0  # which candidate of the start location (and of the end location) the path uses
    dst_index: int = 0
    #: made with the search by `geoengine.routing.plainroute` (else None): the piece's geometry as
    #: `piece_geometry` gives it, and its `PieceSummary`
    shape: tuple | None = None
    summary: PieceSummary | None = None


class PieceSummary(NamedTuple):
    """What a route leg of one piece reports, made with the piece (routing/plainroute.py)."""

    flags: int  # OR of the segments' flags (geoengine.graph.tags F_*)
    highway: bool  # a motorway or trunk segment
    bbox: list  # [min_lon, min_lat, max_lon, max_lat] of the shape
    climb: float | None  # metres (None: the graph has no grades)
    descent: float | None
    seconds: np.ndarray  # per edge: the covered share of its time
    polyline: tuple | None  # (digits, the shape as an encoded polyline), or None


def piece_geometry(graph, leg: Leg):
    """Shape (lon, lat) of a piece and, per traversed edge, its first/last shape index and the fraction
    of the edge it covers. One Numba call over the graph's shape arrays; only the two end edges are
    cut at the snapped positions (as `geoengine.graph.store.cut_polyline` does). Consecutive edges
    share their junction point."""
    if leg.shape is not None:
        return leg.shape
    return piece_shape_kernel(np.ascontiguousarray(leg.edges, dtype=np.int64), float(leg.f_first), float(leg.f_last),
                        graph.shape_offsets, graph.shape_lon, graph.shape_lat)


def pieces_geometry(graph, pieces: list[Leg]):
    """Shape (lon, lat) of consecutive pieces (one route leg) and, per traversed edge, its first/last
    shape index in that shape, the edges and the fraction of each edge covered."""
    if len(pieces) == 1:  # the common case: nothing to join
        lo, la, b, e, cov = piece_geometry(graph, pieces[0])
        return lo, la, b, e, np.asarray(pieces[0].edges, dtype=np.int64), cov
    lons, lats, begins, ends, edges, covered = [], [], [], [], [], []
    offset = 0
    for p_i, piece in enumerate(pieces):
        lo, la, b, e, cov = piece_geometry(graph, piece)
        if p_i > 0:
            # the next piece starts where the previous ended (same location): its point j lands at
            # offset + j, and its point 0 (the duplicate) is dropped
            lo, la = lo[1:], la[1:]
            b = b + offset
            e = e + offset
        lons.append(lo)
        lats.append(la)
        begins.append(b)
        ends.append(e)
        edges.append(piece.edges)
        covered.append(cov)
        offset = int(e[-1]) if len(e) else offset
    return (np.concatenate(lons), np.concatenate(lats), np.concatenate(begins), np.concatenate(ends),
            np.concatenate(edges).astype(np.int64), np.concatenate(covered))


@numba.njit(cache=True, nogil=True)
def _cut(lo, la, s, t, out_lo, out_la, pos):
    """Append the part of polyline (lo, la) between fractions s <= t of its length; returns new pos."""
    m = lo.shape[0]
    if s <= 0.0 and t >= 1.0:
        for k in range(m):
            out_lo[pos] = lo[k]
            out_la[pos] = la[k]
            pos += 1
        return pos
    s = min(max(s, 0.0), 1.0)
    t = min(max(t, s), 1.0)
    cum = np.zeros(m)
    for k in range(m - 1):
        cum[k + 1] = cum[k] + haversine_scalar(la[k], lo[k], la[k + 1], lo[k + 1])
    total = cum[m - 1]
    if total <= 0 or m < 2:
        out_lo[pos] = lo[0]
        out_la[pos] = la[0]
        return pos + 1
    i_s = 0
    for side in range(2):
        x = (s if side == 0 else t) * total
        # searchsorted(cum, x, 'right') - 1, clipped to [0, m - 2]
        i = np.searchsorted(cum, x, side="right") - 1
        i = min(max(i, 0), m - 2)
        d = cum[i + 1] - cum[i]
        u = 0.0 if d <= 0 else (x - cum[i]) / d
        if side == 1:
            for k in range(i_s + 1, i + 1):
                out_lo[pos] = lo[k]
                out_la[pos] = la[k]
                pos += 1
        else:
            i_s = i
        out_lo[pos] = lo[i] + u * (lo[i + 1] - lo[i])
        out_la[pos] = la[i] + u * (la[i + 1] - la[i])
        pos += 1
    return pos


@numba.njit(cache=True, nogil=True)
def piece_shape_kernel(edges, f_first, f_last, so, slon, slat):
    n = edges.shape[0]
    total = 0
    for i in range(n):
        k = edges[i] >> 1
        total += so[k + 1] - so[k]
    out_lo = np.empty(total + 2)
    out_la = np.empty(total + 2)
    begin = np.zeros(n, np.int64)
    end = np.zeros(n, np.int64)
    covered = np.ones(n)
    pos = 0
    for i in range(n):
        k = edges[i] >> 1
        a, b = so[k], so[k + 1]
        c = b - a
        if 0 < i < n - 1:
            # a wholly travelled middle edge: its points after the first (the junction, already written)
            start = pos
            for j in range(1, c):
                p = b - 1 - j if edges[i] & 1 else a + j
                out_lo[pos] = slon[p]
                out_la[pos] = slat[p]
                pos += 1
            begin[i] = end[i - 1]
            end[i] = begin[i] + (pos - start)
            continue
        lo = np.empty(c)
        la = np.empty(c)
        if edges[i] & 1:
            for j in range(c):
                lo[j] = slon[b - 1 - j]
                la[j] = slat[b - 1 - j]
        else:
            for j in range(c):
                lo[j] = slon[a + j]
                la[j] = slat[a + j]
        s = f_first if i == 0 else 0.0
        t = f_last if i == n - 1 else 1.0
        if i == 0 or i == n - 1:
            covered[i] = t - s
        start = pos
        if i == 0:
            pos = _cut(lo, la, s, t, out_lo, out_la, pos)
            begin[i] = 0
            end[i] = pos - 1
        else:
            # the junction point is the previous edge's last point: drop this edge's first point
            pos = _cut(lo, la, s, t, out_lo, out_la, pos)
            for j in range(start, pos - 1):
                out_lo[j] = out_lo[j + 1]
                out_la[j] = out_la[j + 1]
            pos -= 1
            begin[i] = end[i - 1]
            end[i] = begin[i] + (pos - start)
    return out_lo[:pos].copy(), out_la[:pos].copy(), begin, end, covered


@numba.njit(cache=True, nogil=True)
def path_prefix_costs(offsets, targets, weights, edge_cost, path):
    """c[k]: cost from the start of path[0] to the end of path[k] through the turn graph's arcs
    (turn costs included); inf where two consecutive edges are not joined by an arc."""
    n = len(path)
    c = np.empty(n)
    c[0] = edge_cost[path[0]]
    for k in range(1, n):
        a = path[k - 1]
        b = path[k]
        w = np.inf
        for q in range(offsets[a], offsets[a + 1]):
            if targets[q] == b and weights[q] < w:
                w = weights[q]
        c[k] = c[k - 1] + w
    return c


@numba.njit(cache=True, nogil=True)
def shape_osm_ids(edges, first, last, begin, end, lon, lat, so, slon, slat, sid):
    """The OSM node id of every point of a path's shape (`pieces_geometry`'s lon, lat, begin, end), as
    OSRM's `nodes` annotation gives them: a shape point its own node; a snapped end point, which lies on
    a road segment, the node that segment starts from (at a route's start) or ends at (at its end), so
    that each pair of consecutive ids is the OSM segment the shape's segment lies on. `first` / `last`:
    whether the edge is its piece's first / last (cut at the snapped positions by `_cut`, whose output
    is the cut segment's start, the shape points after it, and a point on the last cut segment)."""
    out = np.zeros(lon.shape[0], np.int64)
    for i in range(edges.shape[0]):
        e = edges[i]
        k = e >> 1
        a, b = so[k], so[k + 1]
        c = b - a
        cnt = end[i] - begin[i] + 1
        off = 0
        if first[i] and last[i]:  # cut at both ends: find the segment the start point lies on
            if cnt >= 3:  # the second point is a shape point, copied exactly
                for j in range(1, c):
                    p = b - 1 - j if e & 1 else a + j
                    if slon[p] == lon[begin[i] + 1] and slat[p] == lat[begin[i] + 1]:
                        off = j - 1
                        break
            else:  # both points on one segment: the one nearest the start point
                best = np.inf
                x, y = lon[begin[i]], lat[begin[i]]
                for j in range(c - 1):
                    p = b - 1 - j if e & 1 else a + j
                    q = b - 2 - j if e & 1 else a + j + 1
                    dx, dy = slon[q] - slon[p], slat[q] - slat[p]
                    ll = dx * dx + dy * dy
                    t = 0.0 if ll <= 0 else min(max(((x - slon[p]) * dx + (y - slat[p]) * dy) / ll, 0.0), 1.0)
                    d = (slon[p] + t * dx - x) ** 2 + (slat[p] + t * dy - y) ** 2
                    if d < best:
                        best = d
                        off = j
        elif first[i]:  # cut at the start only: the edge's last `cnt` points
            off = max(c - cnt, 0)
        for q in range(cnt):
            j = min(off + q, c - 1)
            out[begin[i] + q] = sid[b - 1 - j if e & 1 else a + j]
    return out


def leg_osm_ids(graph, leg) -> np.ndarray | None:
    """`shape_osm_ids` of a typed route leg (geoengine.services.route.RouteLeg: shape, edges, ranges
    and pieces); None when the graph has no shape point ids (bundles built before they were kept)."""
    sid = getattr(graph, "shape_osm_id", None)
    if sid is None or leg.shape_begin is None or len(leg.edges) == 0:
        return None
    sizes = np.array([len(p.edges) for p in leg.pieces] if leg.pieces else [len(leg.edges)], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    first = np.zeros(len(leg.edges), dtype=np.bool_)
    last = np.zeros(len(leg.edges), dtype=np.bool_)
    first[starts] = True
    last[starts + sizes - 1] = True
    c = np.ascontiguousarray
    return shape_osm_ids(c(leg.edges, np.int64), first, last, c(leg.shape_begin, np.int64), c(leg.shape_end, np.int64),
                         c(leg.lon, np.float64), c(leg.lat, np.float64), graph.shape_offsets, graph.shape_lon,
                         graph.shape_lat, sid)
