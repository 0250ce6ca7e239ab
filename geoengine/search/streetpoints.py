"""The street points' nearest-neighbour search of the search stage (build time).

The points: every street segment's first vertex and floor(length / DENSIFY_KM) points evenly between its
ends, in the equirectangular km plane around `lat0` (`addresses.street_points`), computed a chunk of
segments at a time with the same float64 operations as the one-shot numpy formula they replace (a test
compares them bit for bit).

The search: scipy's k-d tree built with `leafsize=128, balanced_tree=False, compact_nodes=False` (sliding
midpoint splits, nodes not shrunk to their points' box). At 16 copies of Liechtenstein (377,000 points)
the points and the tree hold 11.9 MB after they are made, where the one-shot formula and the default tree
(median splits, compact nodes, leaves of 16) held 25.0 MB (RSS, in a process of its own); the queries
cost about the same. Its answers are exact whatever the tree's shape, except in one thing the tree does
not state: the order of **equal distances**. `StreetPoints.query` fixes it: equal distances are ordered by
the point's segment (the lower index of `DocSet.seg` first), then by the point. Points of one segment are
then all that can stay tied, and the callers read only the segment. A shared vertex of two streets (a
junction) is two points at one place; which came first used to be the default tree's internal order, so
answers at such ties changed once (2026-11-28: the street of 11 documents of Liechtenstein, 5 of Andorra,
40 of Nominatim's test extract; the default tree with this rule gives the same index bytes).

(A uniform grid with the points sorted by cell was tried: as a Numba kernel it is as fast as the tree, but
the search stage's process runs no other compiled kernel and loading Numba's code generator costs about
63 MB of resident memory; in plain numpy it was 30-100x slower than the tree.)
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

CHUNK = 1 << 16  # segments (and points) computed per step
TIE_EXTRA = 8  # neighbours asked beyond k, so that a run of equal distances at the k-th is seen whole


class StreetPoints:
    """The points (`xy` (n, 2) km) of the street segments, the segment of each (`seg`, int32), and a k-d tree
    over them."""

    def __init__(self, xy: np.ndarray, seg: np.ndarray):
        self.xy, self.seg = xy, seg
        self.tree = cKDTree(xy, leafsize=128, balanced_tree=False, compact_nodes=False)

    def __len__(self) -> int:
        return len(self.seg)

    def query(self, q, k: int = 1, distance_upper_bound: float = np.inf):
        """As cKDTree.query: (distances, points) of the k nearest points strictly within the bound, nearest
        first, equal distances ordered by segment, then point; shape (m,) for k=1, else (m, k); inf and
        len(self) where fewer are found."""
        q = np.ascontiguousarray(q, np.float64).reshape(-1, 2)
        n = len(self.seg)
        dist = np.empty((len(q), k))
        idx = np.empty((len(q), k), np.int64)
        todo, extra = np.arange(len(q)), 1  # first k + 1: enough to see whether the k-th is tied
        while len(todo):
            kk = min(k + extra, n)
            d, i = self.tree.query(q[todo], k=kk, distance_upper_bound=distance_upper_bound)
            d, i = d.reshape(len(todo), kk), i.reshape(len(todo), kk)
            tied = (np.isfinite(d[:, 1:]) & (d[:, 1:] == d[:, :-1])).any(axis=1)
            if tied.any():  # equal distances: by segment, then point
                s = np.where(i[tied] < n, self.seg[np.minimum(i[tied], n - 1)], np.iinfo(np.int32).max)
                o = np.lexsort((i[tied], s.astype(np.int64), d[tied]), axis=-1)
                d[tied], i[tied] = np.take_along_axis(d[tied], o, -1), np.take_along_axis(i[tied], o, -1)
            dd, ii = d[:, :k], i[:, :k]
            if kk < k:  # (fewer points than k)
                dd = np.concatenate([dd, np.full((len(todo), k - kk), np.inf)], 1)
                ii = np.concatenate([ii, np.full((len(todo), k - kk), n)], 1)
            dist[todo], idx[todo] = dd, ii
            # a row whose last neighbour asked is as near as its k-th may have more at that distance
            again = (kk < n) & np.isfinite(d[:, -1]) & (d[:, -1] <= dd[:, k - 1])
            todo, extra = todo[again], max(extra * 4, TIE_EXTRA)
        if k == 1:
            return dist[:, 0], idx[:, 0]
        return dist, idx


def build_points(seg: np.ndarray, lat0: float, km_per_deg: float, densify_km: float) -> StreetPoints:
    """The points of segments `seg` (m, 4) (lon1, lat1, lon2, lat2): each segment's first vertex (points 0 ..
    m - 1), then floor(length / densify_km) points evenly between the ends of each segment in turn, with the
    numpy formula's operations: x = lon * km_per_deg * cos(lat0), y = lat * km_per_deg, a point a + t * (b -
    a) with t = (j + 1) / (extra + 1)."""
    m = len(seg)
    cos0 = np.cos(np.radians(lat0))

    def extra_of(s):  # the extra points of each segment of s (not kept: 10 MB at 64 copies)
        dx = s[:, 2] * km_per_deg * cos0 - s[:, 0] * km_per_deg * cos0
        dy = s[:, 3] * km_per_deg - s[:, 1] * km_per_deg
        return np.floor(np.hypot(dx, dy) / densify_km).astype(np.int64)

    n = m + sum(int(extra_of(seg[a:a + CHUNK]).sum()) for a in range(0, m, CHUNK))
    xy = np.empty((n, 2))
    pseg = np.empty(n, np.int32)
    for a in range(0, m, CHUNK):
        s = seg[a:a + CHUNK]
        xy[a:a + len(s), 0] = s[:, 0] * km_per_deg * cos0
        xy[a:a + len(s), 1] = s[:, 1] * km_per_deg
        pseg[a:a + len(s)] = np.arange(a, a + len(s), dtype=np.int32)
    at = m
    for a in range(0, m, CHUNK // 8):  # (about CHUNK points a step: a segment has a few extra points)
        e = extra_of(seg[a:a + CHUNK // 8])
        total = int(e.sum())
        if not total:
            continue
        rep = np.repeat(np.arange(a, a + len(e)), e)
        t = (np.arange(total) - np.repeat(np.cumsum(e) - e, e) + 1) / np.repeat(e + 1, e)
        s = seg[rep]
        ax, ay = s[:, 0] * km_per_deg * cos0, s[:, 1] * km_per_deg
        bx, by = s[:, 2] * km_per_deg * cos0, s[:, 3] * km_per_deg
        xy[at:at + total, 0] = ax + t * (bx - ax)
        xy[at:at + total, 1] = ay + t * (by - ay)
        pseg[at:at + total] = rep
        at += total
    return StreetPoints(xy, pseg)
