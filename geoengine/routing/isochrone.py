"""Isochrones: where one location reaches within given times or distances (POST /isochrone).

Pipeline (all per-request work is Numba or vectorised numpy; see docs/isochrone.md):

1. Snap the location (the router's candidates) and run ONE bounded search over the profile's
   edge-based graph (vertices = directed road edges, arcs = allowed turns). Time contours expand in
   the costing's cost order and label every edge with the travel TIME along that cost-optimal tree
   (Valhalla's semantics, so every costing option changes the reach); distance contours search the
   same turn graph re-weighted with edge lengths (shortest distance). The search stops where the
   metric passes the largest contour; edges entered but not finished are kept as partial pieces.
2. Rasterise the reached edge pieces onto a metre grid (local equirectangular projection around the
   location): every cell gets the smallest metric of the road samples in it; then the values spread to
   the cells within a small buffer (the mode's off-road allowance).
3. Marching squares at each contour value on that one grid gives oriented rings (outer rings
   counter-clockwise, holes clockwise), assembled into (Multi)Polygons, denoised, simplified
   (`generalize`), and projected back to lon/lat.
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass

import numba
import numpy as np

from geoengine.arrays import unique
from geoengine.geo import EARTH_RADIUS_M
from geoengine.routing._heap import heap_decrease, heap_pop, heap_push

INF = np.inf
DEG = math.pi / 180.0


# Off-road allowance (metres) around reached roads, per mode: the buffer the polygon keeps around them.
BUFFER_M = {"auto": 90.0, "truck": 90.0, "motorcycle": 90.0, "motor_scooter": 70.0, "bicycle": 50.0,
            "pedestrian": 30.0}
MAX_CELLS_SIDE = 400  # the grid's longer side has at most about this many cells
MIN_HOLE_CELLS = 4.0  # holes smaller than this many grid cells are filled


# ----------------------------------------------------------------------------------------------------
# Numba kernels
# ----------------------------------------------------------------------------------------------------
@numba.njit(cache=True, nogil=True)
def _reach_kernel(offsets, targets, w, am, em, sv, so, sm, limit, n):
    """Cost-ordered search from the sources, pruned where the metric passes `limit`.

    w: arc cost (order); am: arc metric (head edge's metric + turn delay); em: vertex (edge) metric.
    Returns (end, start): metric at the end of each edge (inf unless the edge is finished within the
    limit) and the smallest metric at which the edge is entered (may exceed the limit; negative on a
    source edge, where the location lies part-way along it)."""
    cost = np.full(n, INF)
    end = np.full(n, INF)
    start = np.full(n, INF)
    hk = np.empty(max(n, 1), np.float64)
    hv = np.empty(max(n, 1), np.int32)
    hpos = np.full(n, -1, np.int64)
    done = np.zeros(n, np.bool_)
    size = 0
    for i in range(sv.shape[0]):
        v = sv[i]
        s = sm[i] - em[v]
        if s < start[v]:
            start[v] = s
        if sm[i] > limit:
            continue
        if cost[v] == INF:
            cost[v] = so[i]
            end[v] = sm[i]
            size = heap_push(hk, hv, hpos, size, v, so[i])
        elif so[i] < cost[v]:
            cost[v] = so[i]
            end[v] = sm[i]
            heap_decrease(hk, hv, hpos, v, so[i])
    while size > 0:
        v, d, size = heap_pop(hk, hv, hpos, size)
        done[v] = True
        mv = end[v]
        for k in range(offsets[v], offsets[v + 1]):
            x = targets[k]
            if x == v:
                continue
            nm = mv + am[k]
            s = nm - em[x]
            if s < start[x]:
                start[x] = s
            if nm > limit or done[x]:
                continue
            nd = d + w[k]
            if cost[x] == INF:
                cost[x] = nd
                end[x] = nm
                size = heap_push(hk, hv, hpos, size, x, nd)
            elif nd < cost[x]:
                cost[x] = nd
                end[x] = nm
                heap_decrease(hk, hv, hpos, x, nd)
    return end, start


@numba.njit(cache=True, nogil=True)
def _pieces_bbox(edges, shape_offsets, shape_lon, shape_lat, lon0, lat0, kx, ky):
    """Bounding box (metres, local projection) of the shapes of `edges`."""
    xmin = INF
    ymin = INF
    xmax = -INF
    ymax = -INF
    for i in range(edges.shape[0]):
        k = edges[i] >> 1
        for p in range(shape_offsets[k], shape_offsets[k + 1]):
            x = (shape_lon[p] - lon0) * kx
            y = (shape_lat[p] - lat0) * ky
            xmin = min(xmin, x)
            xmax = max(xmax, x)
            ymin = min(ymin, y)
            ymax = max(ymax, y)
    return xmin, ymin, xmax, ymax


@numba.njit(cache=True, nogil=True)
def _rasterise(edges, start, em, limit, shape_offsets, shape_lon, shape_lat, lon0, lat0, kx, ky,
               x0, y0, cell, nx, ny, radius):
    """Grid [ny, nx] of the smallest metric of road samples per cell, spread to the cells within
    `radius` cells (disc); inf where nothing is reached. Samples are at most half a cell apart."""
    grid = np.full((ny, nx), INF)
    step = cell * 0.5
    for i in range(edges.shape[0]):
        e = edges[i]
        k = e >> 1
        a = shape_offsets[k]
        b = shape_offsets[k + 1]
        npt = b - a
        if npt < 2:
            continue
        # total projected length of the edge
        total = 0.0
        for p in range(a, b - 1):
            dx = (shape_lon[p + 1] - shape_lon[p]) * kx
            dy = (shape_lat[p + 1] - shape_lat[p]) * ky
            total += math.sqrt(dx * dx + dy * dy)
        s0 = start[e]
        me = em[e]
        rev = (e & 1) == 1
        run = 0.0
        stop = False
        for q in range(npt - 1):
            if rev:
                p1 = b - 1 - q
                p2 = b - 2 - q
            else:
                p1 = a + q
                p2 = a + q + 1
            xa = (shape_lon[p1] - lon0) * kx
            ya = (shape_lat[p1] - lat0) * ky
            xb = (shape_lon[p2] - lon0) * kx
            yb = (shape_lat[p2] - lat0) * ky
            seg = math.sqrt((xb - xa) ** 2 + (yb - ya) ** 2)
            ns = int(seg / step) + 1
            for j in range(ns + 1):
                t = j / ns
                frac = (run + t * seg) / total if total > 0 else 1.0
                m = s0 + frac * me
                if m < 0.0:
                    continue
                if m > limit:
                    stop = True
                    break
                cx = int((xa + t * (xb - xa) - x0) / cell)
                cy = int((ya + t * (yb - ya) - y0) / cell)
                if 0 <= cx < nx and 0 <= cy < ny and m < grid[cy, cx]:
                    grid[cy, cx] = m
            if stop:
                break
            run += seg
    if radius <= 0:
        return grid
    out = grid.copy()
    r2 = (radius + 0.5) * (radius + 0.5)
    for cy in range(ny):
        for cx in range(nx):
            m = grid[cy, cx]
            if m == INF:
                continue
            for dy in range(-radius, radius + 1):
                yy = cy + dy
                if yy < 0 or yy >= ny:
                    continue
                for dx in range(-radius, radius + 1):
                    if dx * dx + dy * dy > r2:
                        continue
                    xx = cx + dx
                    if 0 <= xx < nx and m < out[yy, xx]:
                        out[yy, xx] = m
    return out


@numba.njit(cache=True, nogil=True)
def _crossing(va, vb, level):
    if va == INF or vb == INF:
        return 0.5
    t = (level - va) / (vb - va)
    return min(max(t, 0.01), 0.99)


@numba.njit(cache=True, nogil=True)
def _contour_rings(grid, level, x0, y0, cell):
    """Marching squares at `level` (inside: value <= level) over a grid whose border cells are outside.

    Vertices of the squares are cell centres. Returns (xs, ys, ring_offsets): closed rings (first point
    repeated at the end), inside on the left: outer rings counter-clockwise, holes clockwise. Saddles
    join the inside corners (8-connected inside)."""
    ny, nx = grid.shape
    nxt = np.full(2 * ny * nx, -1, np.int64)
    inside = grid <= level
    eid = np.empty(4, np.int64)
    ins = np.empty(4, np.bool_)
    for i in range(ny - 1):
        for j in range(nx - 1):
            ins[0] = inside[i, j]
            ins[1] = inside[i, j + 1]
            ins[2] = inside[i + 1, j + 1]
            ins[3] = inside[i + 1, j]
            if ins[0] == ins[1] and ins[1] == ins[2] and ins[2] == ins[3]:
                continue
            eid[0] = 2 * (i * nx + j)          # bottom: (i,j)-(i,j+1)
            eid[1] = 2 * (i * nx + j + 1) + 1  # right: (i,j+1)-(i+1,j+1)
            eid[2] = 2 * ((i + 1) * nx + j)    # top: (i+1,j)-(i+1,j+1)
            eid[3] = 2 * (i * nx + j) + 1      # left: (i,j)-(i+1,j)
            for kk in range(4):
                # counter-clockwise around the square: corner kk -> corner kk+1 crosses side kk
                if ins[kk] and not ins[(kk + 1) & 3]:
                    # leaving the inside: link to the next side where the walk enters it again
                    for dd in range(1, 4):
                        s = (kk + dd) & 3
                        if (not ins[s]) and ins[(s + 1) & 3]:
                            nxt[eid[kk]] = eid[s]
                            break
    # count and trace
    total = 0
    for q in range(nxt.shape[0]):
        if nxt[q] >= 0:
            total += 1
    xs = np.empty(total + total, np.float64)
    ys = np.empty(total + total, np.float64)
    offs = np.zeros(total + 1, np.int64)
    nr = 0
    npnt = 0
    for q0 in range(nxt.shape[0]):
        if nxt[q0] < 0:
            continue
        offs[nr] = npnt
        q = q0
        while q >= 0 and nxt[q] >= 0:
            cellid = q >> 1
            ci = cellid // nx
            cj = cellid - ci * nx
            if (q & 1) == 0:  # horizontal side (ci,cj)-(ci,cj+1)
                t = _crossing(grid[ci, cj], grid[ci, cj + 1], level)
                xs[npnt] = x0 + (cj + 0.5 + t) * cell
                ys[npnt] = y0 + (ci + 0.5) * cell
            else:  # vertical side (ci,cj)-(ci+1,cj)
                t = _crossing(grid[ci, cj], grid[ci + 1, cj], level)
                xs[npnt] = x0 + (cj + 0.5) * cell
                ys[npnt] = y0 + (ci + 0.5 + t) * cell
            npnt += 1
            nq = nxt[q]
            nxt[q] = -1
            q = nq
        xs[npnt] = xs[offs[nr]]
        ys[npnt] = ys[offs[nr]]
        npnt += 1
        nr += 1
    offs[nr] = npnt
    return xs[:npnt], ys[:npnt], offs[:nr + 1]


@numba.njit(cache=True, nogil=True)
def _simplify_rings(xs, ys, offs, tol):
    """Douglas-Peucker on every closed ring (first point == last); returns (xs, ys, offsets). A ring
    keeps at least its first point, its farthest point from it and the closing point; a ring that
    would keep fewer than 4 points stays as it is."""
    nr = offs.shape[0] - 1
    keep = np.zeros(xs.shape[0], np.bool_)
    stack = np.empty((max(xs.shape[0], 2), 2), np.int64)
    t2 = tol * tol
    for r in range(nr):
        a = offs[r]
        b = offs[r + 1] - 1
        keep[a] = True
        keep[b] = True
        if b - a < 3:
            continue
        # split at the point farthest from the first one
        far = a + 1
        fd = -1.0
        for p in range(a + 1, b):
            d = (xs[p] - xs[a]) ** 2 + (ys[p] - ys[a]) ** 2
            if d > fd:
                fd = d
                far = p
        keep[far] = True
        top = 0
        stack[top, 0] = a
        stack[top, 1] = far
        top += 1
        stack[top, 0] = far
        stack[top, 1] = b
        top += 1
        while top > 0:
            top -= 1
            i = stack[top, 0]
            j = stack[top, 1]
            if j - i < 2:
                continue
            dx = xs[j] - xs[i]
            dy = ys[j] - ys[i]
            ll = dx * dx + dy * dy
            best = -1.0
            bi = -1
            for p in range(i + 1, j):
                if ll > 0:
                    c = abs(dy * (xs[p] - xs[i]) - dx * (ys[p] - ys[i]))
                    d = c * c / ll
                else:
                    d = (xs[p] - xs[i]) ** 2 + (ys[p] - ys[i]) ** 2
                if d > best:
                    best = d
                    bi = p
            if best > t2:
                keep[bi] = True
                stack[top, 0] = i
                stack[top, 1] = bi
                top += 1
                stack[top, 0] = bi
                stack[top, 1] = j
                top += 1
        kept = 0
        for p in range(a, b + 1):
            if keep[p]:
                kept += 1
        if kept < 4:  # too small to simplify: keep the ring as traced
            for p in range(a, b + 1):
                keep[p] = True
    n = 0
    for p in range(xs.shape[0]):
        if keep[p]:
            n += 1
    ox = np.empty(n, np.float64)
    oy = np.empty(n, np.float64)
    oo = np.zeros(nr + 1, np.int64)
    q = 0
    for r in range(nr):
        for p in range(offs[r], offs[r + 1]):
            if keep[p]:
                ox[q] = xs[p]
                oy[q] = ys[p]
                q += 1
        oo[r + 1] = q
    return ox, oy, oo


# ----------------------------------------------------------------------------------------------------
# Search
# ----------------------------------------------------------------------------------------------------
_ARC_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_ARC_LOCK = threading.Lock()


def _arc_metrics(prof):
    """(arc time s, arc length m) of the profile's search graph, cached per profile."""
    got = _ARC_CACHE.get(prof)
    if got is None:
        from geoengine.routing.profile import unpack

        g = prof.search
        t, _l = unpack(g.secondary)
        length = np.asarray(prof.length, dtype=np.float64)[g.targets]
        got = (np.ascontiguousarray(t), np.ascontiguousarray(length))
        with _ARC_LOCK:
            _ARC_CACHE[prof] = got
    return got


@dataclass
class Reach:
    """Per directed edge (vertex of the profile's search graph) of one bounded search.

    metric: 'time' (seconds) or 'distance' (metres); limit: the bound. `start[e]`: metric where the edge
    is entered (negative on the edge the location lies on), `end[e]`: metric at its end (inf unless the
    edge is finished within the limit); `reached_fraction[e]` in [0, 1]: how much of the edge (from its
    start) lies within the limit. `edge_metric[e]`: the metric of the whole edge.
    Candidates: snapped `edge`, `fraction`, `lon`, `lat` of the location."""

    metric: str
    limit: float
    start: np.ndarray
    end: np.ndarray
    edge_metric: np.ndarray
    candidates: dict

    @property
    def reached_fraction(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            f = (self.limit - self.start) / self.edge_metric
        f = np.where(np.isfinite(self.end), 1.0, f)
        return np.clip(np.nan_to_num(f, nan=0.0, posinf=1.0, neginf=0.0), 0.0, 1.0)

    @property
    def touched(self) -> np.ndarray:
        """Edge ids with some part within the limit."""
        return np.flatnonzero(self.start < self.limit)

    def node_metric(self, graph) -> np.ndarray:
        """float64[N]: metric at which each junction node is reached (inf beyond the limit)."""
        out = np.full(graph.n_nodes, np.inf)
        fin = np.flatnonzero(np.isfinite(self.end))
        np.minimum.at(out, np.asarray(graph.edge_dst)[fin], self.end[fin])
        ent = np.flatnonzero((self.start >= 0) & (self.start <= self.limit))
        np.minimum.at(out, np.asarray(graph.edge_src)[ent], self.start[ent])
        return out


def search(prof, cands: dict, metric: str, limit: float) -> Reach:
    """One bounded search from the snapped candidates (see the module doc)."""
    g = prof.search
    arc_t, arc_l = _arc_metrics(prof)
    e = cands["edge"]
    rem = 1.0 - cands["fraction"]
    if metric == "time":
        em = np.where(np.isfinite(prof.time), prof.time, 0.0)
        w = g.weights
        am = arc_t
        so = rem * prof.cost[e]
    else:
        em = np.asarray(prof.length, dtype=np.float64)
        w = arc_l
        am = arc_l
        so = rem * em[e]
    sm = rem * em[e]
    end, start = _reach_kernel(g.offsets, g.targets, w, am, em, e.astype(np.int64), so, sm, float(limit), g.n)
    return Reach(metric, float(limit), start, end, em, cands)


# ----------------------------------------------------------------------------------------------------
# Geometry
# ----------------------------------------------------------------------------------------------------
def reach_grid(graph, reach: Reach, mode_buffer: float, lon0: float, lat0: float):
    kx = EARTH_RADIUS_M * DEG * math.cos(lat0 * DEG)
    ky = EARTH_RADIUS_M * DEG
    edges = reach.touched.astype(np.int64)
    if edges.size == 0:
        return None
    so, sl, sa = graph.shape_offsets, graph.shape_lon, graph.shape_lat
    xmin, ymin, xmax, ymax = _pieces_bbox(edges, so, sl, sa, lon0, lat0, kx, ky)
    extent = max(xmax - xmin, ymax - ymin, 1.0)
    cell = max(mode_buffer / 2.0, extent / MAX_CELLS_SIDE)
    radius = max(1, int(math.ceil(mode_buffer / cell)))
    pad = radius + 2
    x0 = xmin - pad * cell
    y0 = ymin - pad * cell
    nx = int((xmax - x0) / cell) + pad + 1
    ny = int((ymax - y0) / cell) + pad + 1
    grid = _rasterise(edges, reach.start, reach.edge_metric, reach.limit, so, sl, sa, lon0, lat0, kx, ky,
                      x0, y0, cell, nx, ny, radius)
    return grid, x0, y0, cell, kx, ky


def contour_polygons(grid, level, x0, y0, cell, denoise: float, tolerance: float):
    """Shapely geometry (Polygon/MultiPolygon, metres) of grid <= level, or None."""
    import shapely

    xs, ys, offs = _contour_rings(grid, level, x0, y0, cell)
    if offs.shape[0] < 2:
        return None
    # signed areas (shoelace) per ring; the step from one ring's last point to the next one's first is void
    cross = xs[:-1] * ys[1:] - xs[1:] * ys[:-1]
    cross[offs[1:-1] - 1] = 0.0
    area = np.add.reduceat(cross, offs[:-1]) / 2.0
    shells = np.flatnonzero(area > 0)
    if shells.size == 0:
        return None
    biggest = float(area[shells].max())
    shells = shells[area[shells] >= denoise * biggest] if denoise > 0 else shells
    holes = np.flatnonzero(area < -MIN_HOLE_CELLS * cell * cell)
    if tolerance > 0:
        xs, ys, offs = _simplify_rings(xs, ys, offs, float(tolerance))
    sizes = np.diff(offs)
    shells = shells[sizes[shells] >= 4]
    holes = holes[sizes[holes] >= 4]
    if shells.size == 0:
        return None
    coords = np.column_stack([xs, ys])
    ring_id = np.repeat(np.arange(len(offs) - 1), np.diff(offs))
    sel = np.isin(ring_id, shells)
    # linearrings wants indices 0..k-1: number the selected rings in order
    shell_geoms = shapely.polygons(shapely.linearrings(coords[sel], indices=np.searchsorted(shells, ring_id[sel])))
    polys = list(shell_geoms)
    if holes.size:
        hx, hy = xs[offs[holes]], ys[offs[holes]]
        in_hole = np.isin(ring_id, holes)
        hole_rings = shapely.linearrings(coords[in_hole], indices=np.searchsorted(holes, ring_id[in_hole]))
        # a hole belongs to the smallest shell containing it
        assigned = np.full(holes.size, -1)
        for si in np.argsort(area[shells]):
            free = np.flatnonzero(assigned < 0)
            if free.size == 0:
                break
            hit = shapely.contains_xy(shell_geoms[si], hx[free], hy[free])
            assigned[free[hit]] = si
        for si in unique(assigned[assigned >= 0]).tolist():
            polys[si] = shapely.polygons(shapely.get_exterior_ring(shell_geoms[si]), holes=hole_rings[assigned == si])
    geom = polys[0] if len(polys) == 1 else shapely.MultiPolygon(polys)
    if (tolerance > 0 or holes.size) and not shapely.is_valid(geom):
        # simplification may make a narrow part touch itself, a hole may sit in a dropped island's
        # hole: repair, keep the polygonal parts
        geom = shapely.make_valid(geom)
        if geom.geom_type == "GeometryCollection":
            parts = [g for g in geom.geoms if g.geom_type in ("Polygon", "MultiPolygon")]
            geom = shapely.union_all(parts) if parts else None
    return geom


def to_lonlat(geom, lon0, lat0, kx, ky):
    import shapely

    return shapely.transform(geom, lambda c: np.column_stack([c[:, 0] / kx + lon0, c[:, 1] / ky + lat0]))
