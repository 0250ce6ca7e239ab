"""The street points' nearest-neighbour search of the search stage (build time): a uniform grid of cells,
the points sorted by cell, and compiled kernels (in place of scipy's k-d tree, which held about 100 MB at
64 copies of Liechtenstein while the streets were resolved).

The points are those of `addresses.street_points`: every street segment's first vertex and a point every
DENSIFY_KM along it, in the equirectangular km plane around `lat0`. A query gives, for each query point,
its k nearest points within a distance bound, nearest first, as scipy's `cKDTree.query(x, k,
distance_upper_bound=...)` does (the same float64 distances: sqrt(dx * dx + dy * dy)), with one rule the
tree does not state: **equal distances are ordered by the point's segment (the lower segment index of
`DocSet.seg` first), then by the point's place in the grid** (only points of one segment remain tied then,
and those give the same answer: the callers read the segment). A shared vertex of two streets (a junction)
is two points at one place; which of them came first was the tree's internal order.

Memory: the points (n, 2) float64 and their segments (n,) int32, sorted by cell; the occupied cells' keys
and starts (one int64 each). No per-point index array, no tree nodes. The cells are hashed (a sorted key per
occupied cell, found by binary search), so an extract with far-apart parts costs nothing for the space
between them.
"""

from __future__ import annotations

import math

import numba
import numpy as np

CELL_KM = 0.25  # side of a grid cell: about 5 points (a 50 m spacing) along each street crossing it


@numba.njit(cache=True, nogil=True)
def _point_xy(seg, kx, ky, extra_start, m, i):
    """(x, y, segment) of point i: i < m the first vertex of segment i, else an extra point of the
    segment whose extra points start at `extra_start` (the same operations as street_points' numpy
    formula: a + t * (b - a) with t = (j + 1) / (extra + 1))."""
    if i < m:
        return seg[i, 0] * kx[0] * kx[1], seg[i, 1] * ky, i
    e = i - m
    # the segment s with extra_start[s] <= e < extra_start[s + 1]
    lo, hi = 0, m
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if extra_start[mid] <= e:
            lo = mid
        else:
            hi = mid
    s = lo
    n = extra_start[s + 1] - extra_start[s]
    j = e - extra_start[s]
    t = (j + 1) / (n + 1)
    ax, ay = seg[s, 0] * kx[0] * kx[1], seg[s, 1] * ky
    bx, by = seg[s, 2] * kx[0] * kx[1], seg[s, 3] * ky
    return ax + t * (bx - ax), ay + t * (by - ay), s


@numba.njit(cache=True, nogil=True)
def _cell_keys(seg, kx, ky, extra_start, x0, y0, size, ncols, out):
    m = seg.shape[0]
    for i in range(out.shape[0]):
        x, y, _ = _point_xy(seg, kx, ky, extra_start, m, i)
        out[i] = np.int64(math.floor((y - y0) / size)) * ncols + np.int64(math.floor((x - x0) / size))


@numba.njit(cache=True, nogil=True)
def _fill(seg, kx, ky, extra_start, order, xy, pseg):
    m = seg.shape[0]
    for k in range(order.shape[0]):
        x, y, s = _point_xy(seg, kx, ky, extra_start, m, order[k])
        xy[k, 0] = x
        xy[k, 1] = y
        pseg[k] = s


@numba.njit(cache=True, nogil=True)
def _find_cell(keys, key):
    lo, hi = 0, keys.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    if lo < keys.shape[0] and keys[lo] == key:
        return lo
    return -1


@numba.njit(cache=True, nogil=True)
def _scan_cell(c, start, xy, pseg, qx, qy, bound2, k, bd, bs, bi, have):
    """Offer the points of cell c to the k best (bd: squared distances, bs: segments, bi: points; sorted
    by (distance, segment, point)); returns how many are held."""
    for p in range(start[c], start[c + 1]):
        dx = qx - xy[p, 0]
        dy = qy - xy[p, 1]
        d2 = dx * dx + dy * dy
        if d2 >= bound2:  # strictly within the bound, as the k-d tree
            continue
        s = pseg[p]
        if have == k:
            last = k - 1
            if d2 > bd[last] or (d2 == bd[last] and (s > bs[last] or (s == bs[last] and p > bi[last]))):
                continue
            pos = last
        else:
            pos = have
            have += 1
        while pos > 0 and (bd[pos - 1] > d2 or (bd[pos - 1] == d2 and (bs[pos - 1] > s or (bs[pos - 1] == s and bi[pos - 1] > p)))):
            bd[pos] = bd[pos - 1]
            bs[pos] = bs[pos - 1]
            bi[pos] = bi[pos - 1]
            pos -= 1
        bd[pos] = d2
        bs[pos] = s
        bi[pos] = p
    return have


@numba.njit(cache=True, nogil=True)
def _query(keys, start, xy, pseg, x0, y0, size, ncols, q, k, bound, dist, idx):
    """The k nearest points of each query point q[i] within `bound` (dist[i] sqrt of the squared distance,
    nearest first, inf and -1 past the last one found). Cells are visited ring by ring around the query's
    cell; the search stops once the k-th distance is below every unvisited cell's distance."""
    bound2 = bound * bound
    bd = np.empty(k, np.float64)
    bs = np.empty(k, np.int64)
    bi = np.empty(k, np.int64)
    max_ring = np.int64(math.ceil(bound / size)) + 1
    for i in range(q.shape[0]):
        qx, qy = q[i, 0], q[i, 1]
        cx = np.int64(math.floor((qx - x0) / size))
        cy = np.int64(math.floor((qy - y0) / size))
        # distance from the query to the edges of its own cell: ring r's cells lie at least
        # (r - 1) * size + min(edge distance) away
        fx, fy = qx - (x0 + cx * size), qy - (y0 + cy * size)
        edge = min(min(fx, size - fx), min(fy, size - fy))
        if edge < 0.0:
            edge = 0.0
        have = 0
        for r in range(max_ring + 1):
            if r > 0:
                # no point of ring r or beyond is nearer than this (less 1 micrometre for rounding)
                near = (r - 1) * size + edge - 1e-9
                if near > bound or (have == k and bd[k - 1] < near * near):
                    break
            # the rows cy - r and cy + r whole: one binary search each, then the run of keys
            for yy in (cy - r, cy + r):
                if yy >= 0:
                    lo_key = yy * ncols + max(cx - r, 0)
                    hi_key = yy * ncols + min(cx + r, ncols - 1)
                    c = _find_first(keys, lo_key)
                    while c < keys.shape[0] and keys[c] <= hi_key:
                        have = _scan_cell(c, start, xy, pseg, qx, qy, bound2, k, bd, bs, bi, have)
                        c += 1
                if r == 0:
                    break
            # the columns cx - r and cx + r between those rows
            if r > 0:
                for xx in (cx - r, cx + r):
                    if 0 <= xx < ncols:
                        for yy in range(max(cy - r + 1, 0), cy + r):
                            c = _find_cell(keys, yy * ncols + xx)
                            if c >= 0:
                                have = _scan_cell(c, start, xy, pseg, qx, qy, bound2, k, bd, bs, bi, have)
        for j in range(k):
            if j < have:
                dist[i, j] = math.sqrt(bd[j])
                idx[i, j] = bi[j]
            else:
                dist[i, j] = np.inf
                idx[i, j] = -1


@numba.njit(cache=True, nogil=True)
def _find_first(keys, key):
    """The first position whose key is >= key."""
    lo, hi = 0, keys.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


class StreetGrid:
    """The street points sorted by grid cell (`xy` (n, 2) km, `seg` (n,) int32 segment of each point) and
    the occupied cells (`keys`, sorted; `start`, the first point of each and one more at the end)."""

    def __init__(self, xy, seg, keys, start, x0, y0, size, ncols):
        self.xy, self.seg, self.keys, self.start = xy, seg, keys, start
        self.x0, self.y0, self.size, self.ncols = float(x0), float(y0), float(size), int(ncols)

    def __len__(self) -> int:
        return len(self.seg)

    def query(self, q, k: int = 1, distance_upper_bound: float = np.inf):
        """As cKDTree.query: (distances, points) of the k nearest points within the bound, nearest first
        (equal distances: the lower segment first); shape (m,) for k=1, else (m, k); inf and -1 where
        fewer are found."""
        q = np.ascontiguousarray(q, np.float64).reshape(-1, 2)
        dist = np.empty((len(q), k))
        idx = np.empty((len(q), k), np.int64)
        bound = float(distance_upper_bound)
        if not np.isfinite(bound):
            bound = 1e300
        if len(self.seg):
            _query(self.keys, self.start, self.xy, self.seg, self.x0, self.y0, self.size, self.ncols, q, k,
                   bound, dist, idx)
        else:
            dist[:] = np.inf
            idx[:] = -1
        if k == 1:
            return dist[:, 0], idx[:, 0]
        return dist, idx


def build_grid(seg: np.ndarray, lat0: float, km_per_deg: float, densify_km: float,
               cell_km: float = CELL_KM) -> StreetGrid:
    """The grid of the points of segments `seg` (m, 4) (lon1, lat1, lon2, lat2): each segment's first vertex
    and floor(length / densify_km) points evenly between its ends (addresses.street_points)."""
    seg = np.ascontiguousarray(seg, np.float64)
    m = len(seg)
    cos0 = np.cos(np.radians(lat0))
    kx = np.array([km_per_deg, cos0], np.float64)  # x = lon * km_per_deg * cos0, in that order
    ky = float(km_per_deg)
    # the extra points per segment, as street_points' numpy formula counts them
    ax, ay = seg[:, 0] * km_per_deg * cos0, seg[:, 1] * km_per_deg
    bx, by = seg[:, 2] * km_per_deg * cos0, seg[:, 3] * km_per_deg
    length = np.hypot(bx - ax, by - ay)
    del bx, by
    extra = np.floor(length / densify_km).astype(np.int64)
    del length
    extra_start = np.zeros(m + 1, np.int64)
    np.cumsum(extra, out=extra_start[1:])
    del extra
    n = m + int(extra_start[-1])
    if n == 0:
        return StreetGrid(np.zeros((0, 2)), np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(1, np.int64),
                          0.0, 0.0, cell_km, 1)
    # the grid's origin and width: the points lie within the segments' box
    x0 = float(min(ax.min(), (seg[:, 2] * km_per_deg * cos0).min())) - cell_km
    y0 = float(min(ay.min(), (seg[:, 3] * km_per_deg).min())) - cell_km
    x1 = float(max(ax.max(), (seg[:, 2] * km_per_deg * cos0).max())) + cell_km
    del ax, ay
    ncols = int(math.floor((x1 - x0) / cell_km)) + 2
    keys = np.empty(n, np.int64)
    _cell_keys(seg, kx, ky, extra_start, x0, y0, float(cell_km), ncols, keys)
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    cell_keys = keys[first]
    del keys
    start = np.append(first, n).astype(np.int64)
    xy = np.empty((n, 2))
    pseg = np.empty(n, np.int32)
    _fill(seg, kx, ky, extra_start, order, xy, pseg)
    return StreetGrid(xy, pseg, cell_keys, start, x0, y0, cell_km, ncols)
