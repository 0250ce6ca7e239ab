"""The snapping grid: one sparse grid over the pieces of the road graph's edge shapes (a piece is the line
between two consecutive shape points), read by the snapping kernels of routing/fastsnap.py (routes,
matrices, batch routes) and routing/matching.py (map matching). The R-tree of routing/snap.py stays for
locations with heading, side or street hints.

Cells are `CELL_M`-metre squares of one lattice anchored at (-180, -90) (their width in degrees set at the
pieces' median latitude). Only cells that hold a piece exist: an open-addressing hash table maps a cell's
key (row * columns + column) to its rows of `items` (piece ids, ascending; cells stored in key order). A
piece is listed in every cell its line crosses (its bounding box's cells when those are few, else, row
by row, the span of columns the line crosses there, one column wider on each side). Memory and build time
therefore grow with the pieces and their length, not with the bounding box of the data: an extract with
far-apart parts (Liechtenstein and Alabama, France and its overseas regions) costs what its parts cost.

Public interface: `PieceGrid(lon, lat, piece_a)` builds it; `grid.arrays` is the tuple the kernels take;
`box_cells(arrays, min_lon, min_lat, max_lon, max_lat)` (Numba) gives the ids of the occupied cells that
meet a box, and the pieces of cell c are `items[cell_off[c]:cell_off[c + 1]]`
(`cell_items(arrays)` -> (cell_off, items)). Every piece whose line meets the box is in one of them.
`project(lon, lat, a, px, py, coslat)` is the one projection of a point on a piece both kernels use.
"""

from __future__ import annotations

import numba
import numpy as np

from geoengine.geo import EARTH_RADIUS_M

CELL_M = 100.0
_M_PER_DEG = EARTH_RADIUS_M * np.pi / 180.0
_LON0 = -180.0 - 1e-6
_LAT0 = -90.0 - 1e-6
_SMALL = 8  # a piece whose box covers at most this many cells is listed in all of them
_EMPTY = -1
_MUL = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15 (Fibonacci hashing), wrapping int64


@numba.njit(cache=True, nogil=True, inline="always")
def _slot(key, mask):
    h = key * _MUL
    return (h ^ (h >> 31)) & mask


@numba.njit(cache=True, nogil=True)
def _find(hkeys, key):
    """Slot of `key` in the table, or the empty slot where it would go."""
    mask = hkeys.shape[0] - 1
    s = _slot(key, mask)
    while hkeys[s] != _EMPTY and hkeys[s] != key:
        s = (s + 1) & mask
    return s


@numba.njit(cache=True, nogil=True)
def _cell_span(x0, y0, x1, y1, lon0, lat0, cw, ch, row, small):
    """Columns [c0, c1] of row `row` that the line (x0, y0)-(x1, y1) crosses (padded by one each side),
    or its whole box's columns when `small`."""
    if small or y0 == y1:
        return int(np.floor((min(x0, x1) - lon0) / cw)), int(np.floor((max(x0, x1) - lon0) / cw))
    lo = lat0 + row * ch
    hi = lo + ch
    t0 = (lo - y0) / (y1 - y0)
    t1 = (hi - y0) / (y1 - y0)
    ta = min(max(min(t0, t1), 0.0), 1.0)
    tb = min(max(max(t0, t1), 0.0), 1.0)
    xa = x0 + ta * (x1 - x0)
    xb = x0 + tb * (x1 - x0)
    return int(np.floor((min(xa, xb) - lon0) / cw)) - 1, int(np.floor((max(xa, xb) - lon0) / cw)) + 1


@numba.njit(cache=True, nogil=True)
def _visit(lon, lat, piece_a, lon0, lat0, cw, ch, nxg, fill, hkeys, hcnt, hcell, cell_off, items, used):
    """Enumerate every (cell, piece) pair. fill False: count the pieces per cell in the table (hkeys,
    hcnt), growing it at half load; True: write the pieces into items. Returns (hkeys, hcnt, used)."""
    for p in range(piece_a.shape[0]):
        a = piece_a[p]
        x0, y0, x1, y1 = lon[a], lat[a], lon[a + 1], lat[a + 1]
        cx0 = int(np.floor((min(x0, x1) - lon0) / cw))
        cx1 = int(np.floor((max(x0, x1) - lon0) / cw))
        cy0 = int(np.floor((min(y0, y1) - lat0) / ch))
        cy1 = int(np.floor((max(y0, y1) - lat0) / ch))
        small = (cx1 - cx0 + 1) * (cy1 - cy0 + 1) <= _SMALL
        for cy in range(cy0, cy1 + 1):
            c0, c1 = _cell_span(x0, y0, x1, y1, lon0, lat0, cw, ch, cy, small)
            for cx in range(max(c0, cx0, 0), min(c1, cx1, nxg - 1) + 1):
                key = cy * nxg + cx
                if fill:
                    c = hcell[_find(hkeys, key)]
                    items[cell_off[c]] = p
                    cell_off[c] += 1
                    continue
                s = _find(hkeys, key)
                if hkeys[s] == _EMPTY:
                    if 2 * (used + 1) > hkeys.shape[0]:  # grow: rehash into twice the slots
                        old_k, old_c = hkeys, hcnt
                        hkeys = np.full(2 * old_k.shape[0], _EMPTY, np.int64)
                        hcnt = np.zeros(2 * old_k.shape[0], np.int64)
                        for j in range(old_k.shape[0]):
                            if old_k[j] != _EMPTY:
                                t = _find(hkeys, old_k[j])
                                hkeys[t] = old_k[j]
                                hcnt[t] = old_c[j]
                        s = _find(hkeys, key)
                    hkeys[s] = key
                    used += 1
                hcnt[s] += 1
    return hkeys, hcnt, used


@numba.njit(cache=True, nogil=True)
def _build(lon, lat, piece_a, lon0, lat0, cw, ch, nxg):
    """(hkeys, hcell, cell_off, items, cell_key) of the pieces; see the module doc."""
    z = np.zeros(0, np.int64)
    hkeys, hcnt, used = _visit(lon, lat, piece_a, lon0, lat0, cw, ch, nxg, False, np.full(64, _EMPTY, np.int64),
                               np.zeros(64, np.int64), z, z, z, 0)
    slots = np.flatnonzero(hkeys != _EMPTY)
    order = np.argsort(hkeys[slots])  # cells in key order: a row's cells are neighbours in items
    slots = slots[order]
    n_cell = slots.shape[0]
    cell_key = hkeys[slots].copy()
    hcell = np.full(hkeys.shape[0], -1, np.int64)
    cell_off = np.zeros(n_cell + 1, np.int64)
    for c in range(n_cell):
        hcell[slots[c]] = c
        cell_off[c + 1] = cell_off[c] + hcnt[slots[c]]
    items = np.empty(cell_off[n_cell], np.int64)
    fill = cell_off[:n_cell].copy()
    _visit(lon, lat, piece_a, lon0, lat0, cw, ch, nxg, True, hkeys, hcnt, hcell, fill, items, used)
    return hkeys, hcell, cell_off, items, cell_key


@numba.njit(cache=True, nogil=True)
def box_cells(G, min_lon, min_lat, max_lon, max_lat):
    """Ids of the occupied cells that meet the box (int64 array): one hash probe per cell of the box, or
    a scan of the occupied cells when the box has more cells than the grid holds."""
    hkeys, hcell, cell_off, items, cell_key, im, fm = G
    lon0, lat0, cw, ch = fm[0], fm[1], fm[2], fm[3]
    nxg, cx_lo, cx_hi, cy_lo, cy_hi = im[0], im[1], im[2], im[3], im[4]
    n_cell = cell_key.shape[0]
    if n_cell == 0 or not (min_lon <= max_lon and min_lat <= max_lat):  # NaN boxes meet nothing
        return np.empty(0, np.int64)
    x0 = max(np.floor((min_lon - lon0) / cw), cx_lo)
    x1 = min(np.floor((max_lon - lon0) / cw), cx_hi)
    y0 = max(np.floor((min_lat - lat0) / ch), cy_lo)
    y1 = min(np.floor((max_lat - lat0) / ch), cy_hi)
    if x0 > x1 or y0 > y1:
        return np.empty(0, np.int64)
    ix0, ix1, iy0, iy1 = int(x0), int(x1), int(y0), int(y1)
    if (ix1 - ix0 + 1) * (iy1 - iy0 + 1) > n_cell:
        out = np.empty(n_cell, np.int64)
        m = 0
        for c in range(n_cell):
            k = cell_key[c]
            cy = k // nxg
            cx = k - cy * nxg
            if iy0 <= cy <= iy1 and ix0 <= cx <= ix1:
                out[m] = c
                m += 1
        return out[:m]
    out = np.empty((ix1 - ix0 + 1) * (iy1 - iy0 + 1), np.int64)
    m = 0
    for cy in range(iy0, iy1 + 1):
        for cx in range(ix0, ix1 + 1):
            s = _find(hkeys, cy * nxg + cx)
            if hkeys[s] != _EMPTY:
                out[m] = hcell[s]
                m += 1
    return out[:m]


@numba.njit(cache=True, nogil=True, inline="always")
def project(lon, lat, a, px, py, coslat):
    """(t, metres) of the point (px, py) on the piece from shape point a to a + 1: its position along
    the piece (0..1) and its distance, in local equirectangular metres (`coslat`: cos of py)."""
    bx0 = (lon[a] - px) * coslat * _M_PER_DEG
    by0 = (lat[a] - py) * _M_PER_DEG
    dx = (lon[a + 1] - lon[a]) * coslat * _M_PER_DEG
    dy = (lat[a + 1] - lat[a]) * _M_PER_DEG
    dd = dx * dx + dy * dy
    t = 0.0
    if dd > 0:
        t = min(max(-(bx0 * dx + by0 * dy) / dd, 0.0), 1.0)
    ex = bx0 + t * dx
    ey = by0 + t * dy
    return t, np.sqrt(ex * ex + ey * ey)


@numba.njit(cache=True, nogil=True)
def cell_items(G):
    """(cell_off, items) of the grid tuple: the pieces of cell c are items[cell_off[c]:cell_off[c + 1]]."""
    return G[2], G[3]


class PieceGrid:
    """The sparse grid over the pieces (piece i: shape point piece_a[i] -> piece_a[i] + 1 of the
    lon/lat arrays). `arrays` is the tuple the kernels take; `nbytes` its size."""

    def __init__(self, lon: np.ndarray, lat: np.ndarray, piece_a: np.ndarray, cell_m: float = CELL_M):
        lon = np.ascontiguousarray(lon, dtype=np.float64)
        lat = np.ascontiguousarray(lat, dtype=np.float64)
        piece_a = np.ascontiguousarray(piece_a, dtype=np.int64)
        mid = float(np.median(lat[piece_a])) if len(piece_a) else 0.0
        ch = cell_m / _M_PER_DEG
        cw = cell_m / (_M_PER_DEG * max(np.cos(np.radians(mid)), 0.05))
        nxg = int(np.ceil(361.0 / cw)) + 1
        hkeys, hcell, cell_off, items, cell_key = _build(lon, lat, piece_a, _LON0, _LAT0, cw, ch, nxg)
        if len(cell_key):
            rows, cols = cell_key // nxg, cell_key % nxg
            im = np.array([nxg, cols.min(), cols.max(), rows.min(), rows.max()], np.int64)
        else:
            im = np.array([nxg, 0, -1, 0, -1], np.int64)
        fm = np.array([_LON0, _LAT0, cw, ch], np.float64)
        self.cell_m = float(cell_m)
        self.arrays = (hkeys, hcell, cell_off, items, cell_key, im, fm)

    @property
    def n_cells(self) -> int:
        return int(self.arrays[4].shape[0])

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self.arrays))
