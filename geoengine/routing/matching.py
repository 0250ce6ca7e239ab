"""Map matching: a GPS trace -> the road edges it followed (hidden Markov model, Newson & Krumm 2009).

Steps, all array-at-a-time:

1. Candidates: every trace point is snapped with `Snapper.snap_many` within `search_radius` (one
   vectorised R-tree query); the `MAX_CANDIDATES` nearest directed edges are kept. Points without any
   candidate are `unmatched`.
2. Interpolation: a point closer than `interpolation_distance` to the previously kept point is not a
   state of the model; it is projected onto the matched route afterwards (`interpolated`).
3. Transitions (`_transitions`, Numba): for each pair of consecutive kept points, one bounded Dijkstra
   per candidate of the first point over the profile's edge-based search graph with LENGTH weights
   (turn restrictions and access as the costing has them) gives the route distance to every candidate
   of the second point in the same search. The bound is 2 x great-circle + 2 x search_radius + 100 m.
4. Viterbi (`_viterbi`, Numba) in log space: emission -0.5 (d / gps_accuracy)^2, transition
   -|route - great circle| / BETA. When no transition is feasible, or two kept points are farther apart
   than `breakage_distance`, the trace breaks into separate matched sections.
5. Paths (`_paths`, Numba): one bounded search per chosen consecutive pair returns the edges.

`edge_walk` runs the same model with a tight radius (EDGE_WALK_TOLERANCE_M), no interpolation, and
transitions that may not be longer than the straight line plus the tolerance; any point off the network
or any break fails (422). `walk_or_snap` tries edge_walk, then map_snap.

Library entry points: `Matcher.match(...)` -> `MatchResult` (numpy arrays), `Matcher.trip(request)` (the
/map_match document) and `Matcher.attributes(request)` (the /map_match/attributes document).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import SimpleNamespace

import numba
import numpy as np

from geoengine.errors import FieldError, Unprocessable, Unsnappable
from geoengine.geo import EARTH_RADIUS_M, haversine_m
from geoengine.routing._heap import heap_decrease, heap_pop, heap_push
from geoengine.routing.snapgrid import box_cells, project
from geoengine.routing.snapgrid import cell_items as cell_items_of

MAX_CANDIDATES = 12
BETA_M = 3.0
EDGE_WALK_TOLERANCE_M = 5.0
END_TOLERANCE_M = 0.5
INF = np.inf
M_PER_DEG = EARTH_RADIUS_M * np.pi / 180.0

MATCHED, INTERPOLATED, UNMATCHED = 0, 1, 2
TYPE_NAMES = ("matched", "interpolated", "unmatched")


# -- kernels -----------------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _keep_points(has_cand, lon, lat, min_dist):
    """Sequential choice of the points that become HMM states: points with candidates at least
    `min_dist` metres (equirectangular) from the previously kept point; the last one with candidates
    is always kept."""
    n = has_cand.shape[0]
    keep = np.zeros(n, np.bool_)
    last = -1
    last_with = -1
    for i in range(n):
        if not has_cand[i]:
            continue
        last_with = i
        if last < 0:
            keep[i] = True
            last = i
            continue
        c = np.cos(np.radians(0.5 * (lat[i] + lat[last])))
        dx = (lon[i] - lon[last]) * c * M_PER_DEG
        dy = (lat[i] - lat[last]) * M_PER_DEG
        if np.sqrt(dx * dx + dy * dy) >= min_dist:
            keep[i] = True
            last = i
    if last_with >= 0:
        keep[last_with] = True
    return keep


@numba.njit(cache=True, nogil=True)
def _transitions(offsets, targets, wlen, elen, cedge, cfrac, coff, kept, limit, back_tol, out_off, dist, stamp, tstamp,
                 hk, hv, hpos, ctr):
    """Route length (m) from every candidate of kept[k] to every candidate of kept[k+1], flattened at
    out_off[k] + i * nb + j; inf when farther than limit[k] or unreachable; negative for a step back
    along the same edge (at most back_tol metres)."""
    out = np.full(out_off[-1], INF)
    cur = ctr[0]
    tcur = ctr[1]
    for k in range(kept.shape[0] - 1):
        a = kept[k]
        b = kept[k + 1]
        a0, a1 = coff[a], coff[a + 1]
        b0, b1 = coff[b], coff[b + 1]
        nb = b1 - b0
        lim = limit[k]
        # distinct target vertices
        tcur += 1
        ntv = 0
        for j in range(b0, b1):
            v = cedge[j]
            if tstamp[v] != tcur:
                tstamp[v] = tcur
                ntv += 1
        for i in range(a0, a1):
            e = cedge[i]
            fi = cfrac[i]
            base = out_off[k] + (i - a0) * nb
            # same edge: along it, or behind by at most back_tol (GPS noise): a negative route length,
            # so that |route - great circle| grows with the step backwards
            for j in range(b0, b1):
                if cedge[j] == e:
                    d = (cfrac[j] - fi) * elen[e]
                    if d >= -back_tol:
                        out[base + j - b0] = d
            cur += 1
            start = (1.0 - fi) * elen[e]
            if start > lim:
                continue
            stamp[e] = cur
            dist[e] = start
            size = heap_push(hk, hv, hpos, 0, e, start)
            left = ntv
            while size > 0 and left > 0:
                v, d, size = heap_pop(hk, hv, hpos, size)
                if tstamp[v] == tcur and v != e:
                    left -= 1
                    for j in range(b0, b1):
                        if cedge[j] == v:
                            r = d - (1.0 - cfrac[j]) * elen[v]
                            if r <= lim and r < out[base + j - b0]:
                                out[base + j - b0] = r
                elif v == e and tstamp[v] == tcur:
                    left -= 1
                if d > lim:  # d is the distance to the start of every successor
                    continue
                for q in range(offsets[v], offsets[v + 1]):
                    x = targets[q]
                    nd = d + wlen[q]
                    if stamp[x] != cur:
                        stamp[x] = cur
                        dist[x] = nd
                        size = heap_push(hk, hv, hpos, size, x, nd)
                    elif hpos[x] >= 0 and nd < dist[x]:
                        dist[x] = nd
                        heap_decrease(hk, hv, hpos, x, nd)
    ctr[0] = cur
    ctr[1] = tcur
    return out


@numba.njit(cache=True, nogil=True)
def _viterbi(coff, emis, kept, trans, out_off, gc, beta, breakage):
    """Most likely candidate per kept point. Returns (choice: global candidate row or -1, section id
    per kept point). A new section starts where no transition is feasible or the gap exceeds breakage."""
    m = kept.shape[0]
    ncand = emis.shape[0]
    score = np.full(ncand, -INF)
    back = np.full(ncand, -1, np.int64)
    start_sec = np.zeros(m, np.bool_)
    start_sec[0] = True
    a = kept[0]
    for i in range(coff[a], coff[a + 1]):
        score[i] = emis[i]
    for k in range(m - 1):
        a = kept[k]
        b = kept[k + 1]
        a0, a1 = coff[a], coff[a + 1]
        b0, b1 = coff[b], coff[b + 1]
        nb = b1 - b0
        any_ok = False
        if gc[k] <= breakage:
            for j in range(b0, b1):
                best = -INF
                arg = -1
                for i in range(a0, a1):
                    if score[i] == -INF:
                        continue
                    r = trans[out_off[k] + (i - a0) * nb + (j - b0)]
                    if r == INF:
                        continue
                    s = score[i] - abs(r - gc[k]) / beta
                    if s > best:
                        best = s
                        arg = i
                if arg >= 0:
                    score[j] = best + emis[j]
                    back[j] = arg
                    any_ok = True
        if not any_ok:
            start_sec[k + 1] = True
            for j in range(b0, b1):
                score[j] = emis[j]
                back[j] = -1
    # backtrack each section from its best final state
    choice = np.full(m, -1, np.int64)
    section = np.zeros(m, np.int64)
    sid = -1
    for k in range(m):
        if start_sec[k]:
            sid += 1
        section[k] = sid
    k = m - 1
    while k >= 0:
        # k is the last kept point of a section
        b = kept[k]
        best = -INF
        arg = -1
        for j in range(coff[b], coff[b + 1]):
            if score[j] > best:
                best = score[j]
                arg = j
        cur = arg
        while True:
            choice[k] = cur
            if start_sec[k] or cur < 0:
                break
            cur = back[cur]
            k -= 1
        k -= 1
    return choice, section


@numba.njit(cache=True, nogil=True)
def _paths(offsets, targets, wlen, elen, se, sf, te, tf, limit, back_tol, dist, stamp, par, hk, hv, hpos, ctr):
    """Edges of the shortest (length) path for each pair (se[p], sf[p]) -> (te[p], tf[p]), flattened
    with offsets; an empty path when none within limit[p]. Same edge ahead (or behind within back_tol):
    the single edge."""
    npairs = se.shape[0]
    poff = np.zeros(npairs + 1, np.int64)
    buf = np.empty(1024, np.int64)
    used = 0
    cur = ctr[0]
    for p in range(npairs):
        cur += 1
        e = se[p]
        t = te[p]
        found = -1
        if e == t and (tf[p] >= sf[p] or (sf[p] - tf[p]) * elen[e] <= back_tol):
            found = e
            par[e] = -1
            stamp[e] = cur
        else:
            start = (1.0 - sf[p]) * elen[e]
            stamp[e] = cur
            dist[e] = start
            par[e] = -1
            size = heap_push(hk, hv, hpos, 0, e, start)
            lim = limit[p]
            while size > 0:
                v, d, size = heap_pop(hk, hv, hpos, size)
                if v == t and v != e:
                    found = v
                    break
                if d > lim:
                    continue
                for q in range(offsets[v], offsets[v + 1]):
                    x = targets[q]
                    nd = d + wlen[q]
                    if stamp[x] != cur:
                        stamp[x] = cur
                        dist[x] = nd
                        par[x] = v
                        size = heap_push(hk, hv, hpos, size, x, nd)
                    elif hpos[x] >= 0 and nd < dist[x]:
                        dist[x] = nd
                        par[x] = v
                        heap_decrease(hk, hv, hpos, x, nd)
        cnt = 0
        if found >= 0:
            x = found
            cnt = 1
            while par[x] != -1 and x != e:
                x = par[x]
                cnt += 1
            if used + cnt > buf.shape[0]:
                nb = np.empty(max(2 * buf.shape[0], used + cnt), np.int64)
                nb[:used] = buf[:used]
                buf = nb
            x = found
            for q in range(cnt - 1, -1, -1):
                buf[used + q] = x
                if q > 0:
                    x = par[x]
        used += cnt
        poff[p + 1] = used
    ctr[0] = cur
    return buf[:used].copy(), poff


@numba.njit(cache=True, nogil=True)
def _grid_candidates(plon, plat, radius, k_max, usable, G, piece_a, piece_seg, piece_cum, piece_len, seg_len, slon, slat,
                     mpd, stamp, ctr):
    """Candidates of every point (see Matcher._candidates), at most k_max each, nearest first."""
    n = plon.shape[0]
    coff = np.zeros(n + 1, np.int64)
    o_edge = np.empty(n * k_max, np.int64)
    o_frac = np.empty(n * k_max)
    o_lon = np.empty(n * k_max)
    o_lat = np.empty(n * k_max)
    o_dist = np.empty(n * k_max)
    cap = 256
    bp = np.empty(cap, np.int64)
    bd = np.empty(cap)
    bt = np.empty(cap)
    used = 0
    cur = ctr[0]
    cell_off, cell_items = cell_items_of(G)
    for q in range(n):
        cur += 1
        lon0 = plon[q]
        lat0 = plat[q]
        coslat = np.cos(np.radians(lat0))
        dlat = radius / mpd
        dlon = radius / (mpd * max(coslat, 1e-6))
        cells = box_cells(G, lon0 - dlon, lat0 - dlat, lon0 + dlon, lat0 + dlat)
        k = 0
        for ci in range(cells.shape[0]):
            c = cells[ci]
            for r in range(cell_off[c], cell_off[c + 1]):
                p = cell_items[r]
                if stamp[p] == cur:
                    continue
                stamp[p] = cur
                s = piece_seg[p]
                if not (usable[2 * s] or usable[2 * s + 1]):
                    continue
                t, d = project(slon, slat, piece_a[p], lon0, lat0, coslat)
                if d > radius:
                    continue
                if k >= cap:
                    cap *= 2
                    nbp = np.empty(cap, np.int64)
                    nbd = np.empty(cap)
                    nbt = np.empty(cap)
                    nbp[:k] = bp[:k]
                    nbd[:k] = bd[:k]
                    nbt[:k] = bt[:k]
                    bp, bd, bt = nbp, nbd, nbt
                bp[k] = p
                bd[k] = d
                bt[k] = t
                k += 1
        if k == 0:
            coff[q + 1] = used
            continue
        order = np.argsort(bp[:k])
        # local minima along each segment's pieces, then two directed candidates each
        ce = np.empty(2 * k, np.int64)
        cf = np.empty(2 * k)
        cx = np.empty(2 * k)
        cy = np.empty(2 * k)
        cd = np.empty(2 * k)
        m = 0
        for z in range(k):
            r = order[z]
            p = bp[r]
            d = bd[r]
            s = piece_seg[p]
            if z > 0:
                r0 = order[z - 1]
                if bp[r0] == p - 1 and piece_seg[p - 1] == s and not (d < bd[r0]):
                    continue
            if z < k - 1:
                r1 = order[z + 1]
                if bp[r1] == p + 1 and piece_seg[p + 1] == s and not (d <= bd[r1]):
                    continue
            t = bt[r]
            a = piece_a[p]
            f = min(max((piece_cum[p] + t * piece_len[p]) / seg_len[s], 0.0), 1.0)
            lo = slon[a] + t * (slon[a + 1] - slon[a])
            la = slat[a] + t * (slat[a + 1] - slat[a])
            if usable[2 * s]:
                ce[m] = 2 * s
                cf[m] = f
                cx[m] = lo
                cy[m] = la
                cd[m] = d
                m += 1
            if usable[2 * s + 1]:
                ce[m] = 2 * s + 1
                cf[m] = 1.0 - f
                cx[m] = lo
                cy[m] = la
                cd[m] = d
                m += 1
        o2 = np.argsort(cd[:m], kind="mergesort")
        take = min(m, k_max)
        for z in range(take):
            r = o2[z]
            o_edge[used] = ce[r]
            o_frac[used] = cf[r]
            o_lon[used] = cx[r]
            o_lat[used] = cy[r]
            o_dist[used] = cd[r]
            used += 1
        coff[q + 1] = used
    ctr[0] = cur
    return coff, o_edge[:used].copy(), o_frac[:used].copy(), o_lon[:used].copy(), o_lat[:used].copy(), \
        o_dist[:used].copy()


@numba.njit(cache=True, nogil=True)
def arc_sum(offsets, targets, secondary, path):
    """Sum of the secondary metric over the arcs path[i] -> path[i+1] (the cheapest arc when several)."""
    tot = 0.0
    for i in range(path.shape[0] - 1):
        u = path[i]
        v = path[i + 1]
        best = np.inf
        for q in range(offsets[u], offsets[u + 1]):
            if targets[q] == v and secondary[q] < best:
                best = secondary[q]
        if best < np.inf:
            tot += best
    return tot


# -- result -------------------------------------------------------------------------------------------


@dataclass
class Section:
    """One continuously matched part of the trace: `edges` (directed edge ids, in order), the fraction
    of the first edge where it starts and of the last where it ends, and the kept points in it."""

    edges: np.ndarray
    f_first: float
    f_last: float
    points: np.ndarray  # trace point indices of its matched (kept) points


@dataclass
class MatchResult:
    """Per trace point (length N): `type` (0 matched, 1 interpolated, 2 unmatched), `edge` (directed edge
    id, -1 when unmatched), `fraction` along that edge, `lon`/`lat` of the matched position, `distance`
    (metres from the trace point), `section` (index into `sections`, -1 when unmatched) and `edge_index`
    (position of `edge` in the concatenation of the sections' edges, -1 when unmatched)."""

    type: np.ndarray
    edge: np.ndarray
    fraction: np.ndarray
    lon: np.ndarray
    lat: np.ndarray
    distance: np.ndarray
    section: np.ndarray
    edge_index: np.ndarray
    sections: list[Section]

    @property
    def edges(self) -> np.ndarray:
        return np.concatenate([s.edges for s in self.sections]) if self.sections else np.zeros(0, np.int64)


# -- the matcher ----------------------------------------------------------------------------------------


class Matcher:
    """Map matching over a Router's graph, profiles and snapper (thread-safe; one per engine)."""

    def __init__(self, router):
        self.router = router
        self.graph = router.graph
        self.snapper = router.snapper
        sn = self.snapper
        self._piece_first = np.searchsorted(sn.piece_seg, np.arange(self.graph.n_segments + 1), side="left")
        self._pa = np.ascontiguousarray(sn.piece_a, dtype=np.int64)
        self._pseg = np.ascontiguousarray(sn.piece_seg, dtype=np.int64)
        self._pcum = np.ascontiguousarray(sn.piece_cum, dtype=np.float64)
        self._plen = np.ascontiguousarray(sn.piece_len, dtype=np.float64)
        self._seglen = np.ascontiguousarray(sn.seg_len, dtype=np.float64)
        self._slon = np.ascontiguousarray(sn.lon, dtype=np.float64)
        self._slat = np.ascontiguousarray(sn.lat, dtype=np.float64)
        self._grid = sn.grid.arrays  # the snapping grid (routing/snapgrid.py), shared with the fast path
        self._local = threading.local()

    def _ws(self):
        """Per-thread search workspace (vertex-sized arrays, reused; stamps avoid clearing them)."""
        ws = getattr(self._local, "ws", None)
        if ws is None:
            n = max(self.graph.n_edges, 1)
            ws = SimpleNamespace(dist=np.zeros(n), stamp=np.zeros(n, np.int64), tstamp=np.zeros(n, np.int64),
                                 par=np.full(n, -1, np.int64), hk=np.empty(n), hv=np.empty(n, np.int32),
                                 hpos=np.full(n, -1, np.int64), ctr=np.zeros(2, np.int64),
                                 pstamp=np.zeros(max(len(self._pa), 1), np.int64), pctr=np.zeros(1, np.int64))
            self._local.ws = ws
        return ws

    # search graph with length weights, cached on the profile object
    def _length_graph(self, prof):
        g = getattr(prof, "_mm_length", None)
        if g is None:
            s = prof.search
            elen = np.ascontiguousarray(prof.length, dtype=np.float64)
            wlen = np.ascontiguousarray(elen[np.asarray(s.targets)])
            g = (s.n, s.offsets, s.targets, wlen, elen)
            prof._mm_length = g
        return g

    def warm(self, prof) -> None:
        """Compile/load the kernels (used by the benchmark and at server start)."""
        _, off, tgt, wlen, elen = self._length_graph(prof)
        z = np.zeros(1, np.int64)
        _keep_points(np.ones(2, np.bool_), np.zeros(2), np.zeros(2), 1.0)
        w = self._ws()
        _transitions(off, tgt, wlen, elen, z, np.zeros(1), np.array([0, 1, 1]), np.array([0, 1]), np.ones(1), 1.0,
                     np.array([0, 0]), w.dist, w.stamp, w.tstamp, w.hk, w.hv, w.hpos, w.ctr)
        _viterbi(np.array([0, 1, 1]), np.zeros(1), np.array([0]), np.zeros(0), np.array([0]), np.zeros(0), 1.0, 1.0)
        _paths(off, tgt, wlen, elen, z, np.zeros(1), z, np.ones(1), np.ones(1), 1.0, w.dist, w.stamp, w.par, w.hk,
               w.hv, w.hpos, w.ctr)
        self._candidates(prof, np.zeros(1), np.zeros(1), 1.0, 1)

    # -- candidates -----------------------------------------------------------------------------------
    def _candidates(self, prof, lon, lat, radius, k_max):
        """CSR candidates (offsets, edge, fraction, lon, lat, distance), nearest first, at most k_max per
        point; points without any candidate within `radius` get none.

        Unlike routing's snapping (nearest position per edge), a long winding edge (a hairpin road is
        one edge between junctions) may give several candidates: one per local minimum of the distance
        along its shape, so the model can choose the right bend. The pieces of the edge shapes (the
        snapper's arrays) are found through the snapping grid (routing/snapgrid.py, `snapper.grid`),
        queried in one kernel."""
        w = self._ws()
        return _grid_candidates(np.ascontiguousarray(lon), np.ascontiguousarray(lat), float(radius), int(k_max),
                                np.ascontiguousarray(prof.usable), self._grid, self._pa, self._pseg, self._pcum, self._plen, self._seglen, self._slon, self._slat,
                                M_PER_DEG, w.pstamp, w.pctr)

    # -- the model ---------------------------------------------------------------------------------------
    def match(self, prof, lon, lat, *, search_radius=50.0, gps_accuracy=5.0, breakage_distance=2000.0,
              interpolation_distance=10.0, mode: str = "map_snap") -> MatchResult:
        """Match a trace (arrays of lon, lat) on profile `prof`. `mode` 'map_snap' or 'edge_walk' (see the
        module doc; edge_walk raises Unprocessable when the points do not follow the edges)."""
        lon = np.ascontiguousarray(lon, dtype=np.float64)
        lat = np.ascontiguousarray(lat, dtype=np.float64)
        len(lon)
        walk = mode == "edge_walk"
        radius = min(float(search_radius), EDGE_WALK_TOLERANCE_M) if walk else float(search_radius)
        sigma = EDGE_WALK_TOLERANCE_M if walk else float(gps_accuracy)
        coff, cedge, cfrac, clon, clat, cdist = self._candidates(prof, lon, lat, radius, MAX_CANDIDATES)
        has = np.diff(coff) > 0
        if walk and not has.all():
            i = int(np.flatnonzero(~has)[0])
            raise Unprocessable(
                f"edge_walk: shape[{i}] is not on a road the costing may use (within {radius:g} m)",
                errors=[FieldError(f"shape[{i}]", "not on the road network")])
        if not has.any():
            raise Unsnappable(f"no point of the trace is within {radius:g} m of a road the costing may use",
                              errors=[FieldError("shape", f"no routable edge within {radius:g} m of any point")])
        keep = _keep_points(has, lon, lat, 0.0 if walk else float(interpolation_distance))
        kept = np.flatnonzero(keep)
        _n, off, tgt, wlen, elen = self._length_graph(prof)
        gc = haversine_m(lat[kept[:-1]], lon[kept[:-1]], lat[kept[1:]], lon[kept[1:]]) if len(kept) > 1 \
            else np.zeros(0)
        if walk:
            limit = gc + 2.0 * radius + 1.0
            back_tol = 1.0
        else:
            limit = np.minimum(2.0 * gc + 2.0 * radius + 100.0, 2.0 * float(breakage_distance))
            back_tol = 2.0 * radius  # a later point may project this far behind an earlier one (noise)
        nc = np.diff(coff)
        sizes = nc[kept[:-1]] * nc[kept[1:]]
        out_off = np.zeros(len(kept), np.int64)
        np.cumsum(sizes, out=out_off[1:])
        w = self._ws()
        trans = _transitions(off, tgt, wlen, elen, cedge, cfrac, coff, kept, limit, back_tol, out_off, w.dist, w.stamp,
                             w.tstamp, w.hk, w.hv, w.hpos, w.ctr)
        emis = -0.5 * (cdist / sigma) ** 2
        choice, section = _viterbi(coff, emis, kept, trans, out_off, gc, BETA_M,
                                   INF if walk else float(breakage_distance))
        if walk and section[-1] > 0:
            k = int(np.flatnonzero(np.diff(section))[0])
            a, b = int(kept[k]), int(kept[k + 1])
            raise Unprocessable(
                f"edge_walk: shape[{a}] and shape[{b}] are not joined by the road edges under them",
                errors=[FieldError(f"shape[{b}]", f"does not follow the edges from shape[{a}]")])
        return self._assemble(prof, lon, lat, kept, choice, section, coff, cedge, cfrac, clon, clat, cdist, limit,
                              back_tol, (_n, off, tgt, wlen, elen))

    def _assemble(self, prof, lon, lat, kept, choice, section, coff, cedge, cfrac, clon, clat, cdist, limit,
                  back_tol, lg) -> MatchResult:
        n = len(lon)
        _, off, tgt, wlen, elen = lg
        # sections with fewer than two matched points are dropped (their points become unmatched)
        sec_size = np.bincount(section, minlength=int(section.max()) + 1 if len(section) else 0)
        good = (choice >= 0) & (sec_size[section] >= 2)
        kk = kept[good]
        ch = choice[good]
        sec = section[good]
        # consecutive pairs within a section -> paths
        same = sec[1:] == sec[:-1]
        pi = np.flatnonzero(same)
        # limits are indexed by kept pair; consecutive points of a section are consecutive kept points
        pl = np.ascontiguousarray(limit[np.flatnonzero(good)[pi]], dtype=np.float64)
        w = self._ws()
        paths, poff = _paths(off, tgt, wlen, elen, cedge[ch[pi]], cfrac[ch[pi]], cedge[ch[pi + 1]], cfrac[ch[pi + 1]],
                             pl, back_tol, w.dist, w.stamp, w.par, w.hk, w.hv, w.hpos, w.ctr)
        plen = np.diff(poff)
        bad = plen == 0  # cannot happen when the Viterbi found the transition; guard anyway
        if bad.any():
            raise Unprocessable("map matching found no path between two matched points")
        ptype = np.full(n, UNMATCHED, np.int8)
        pedge = np.full(n, -1, np.int64)
        pfrac = np.full(n, np.nan)
        plon = np.full(n, np.nan)
        plat = np.full(n, np.nan)
        pdist = np.full(n, np.nan)
        psec = np.full(n, -1, np.int64)
        pidx = np.full(n, -1, np.int64)
        ptype[kk] = MATCHED
        pedge[kk] = cedge[ch]
        pfrac[kk] = cfrac[ch]
        plon[kk] = clon[ch]
        plat[kk] = clat[ch]
        pdist[kk] = cdist[ch]
        sections: list[Section] = []
        # renumber sections 0..S-1
        uniq, sec_new = np.unique(sec, return_inverse=True)
        psec[kk] = sec_new
        # edge index of every kept point: first point of a section at its section's start; the next ones
        # after len(path)-1 more edges each
        step = np.zeros(len(kk), np.int64)
        step[pi + 1] = plen - 1
        starts = np.r_[True, ~same] if len(kk) else np.zeros(0, bool)
        base_local = np.cumsum(step)
        sec_first = np.flatnonzero(starts)
        local = base_local - np.repeat(base_local[sec_first], np.diff(np.r_[sec_first, len(kk)]))
        offset = 0
        for _s_i, (a, b) in enumerate(zip(sec_first.tolist(), sec_first[1:].tolist() + [len(kk)] * (len(kk) > 0), strict=True)):
            # pairs a..b-1 are pi entries between these kept rows
            pa = np.searchsorted(pi, a)
            pb = np.searchsorted(pi, b - 1)
            parts = [paths[poff[pa]:poff[pa] + 1]] + [paths[poff[p] + 1:poff[p + 1]] for p in range(pa, pb)]
            edges = np.concatenate(parts)
            # positions: monotone along the same edge (a point slightly behind stays where the last was)
            f_first = float(cfrac[ch[a]])
            f_last = float(cfrac[ch[b - 1]])
            if len(edges) == 1:
                f_last = max(f_last, f_first)
            li = local[a:b].copy()
            pts = kk[a:b]
            # a section starting at the very end of its first edge (or ending at the very start of its
            # last; within END_TOLERANCE_M) does not report that edge: its points move to the neighbour
            if len(edges) > 1 and (1.0 - f_first) * elen[edges[0]] <= END_TOLERANCE_M:
                at = li == 0
                pedge[pts[at]] = edges[1]
                pfrac[pts[at]] = 0.0
                li = np.maximum(li - 1, 0)
                edges = edges[1:]
                f_first = 0.0
            if len(edges) > 1 and f_last * elen[edges[-1]] <= END_TOLERANCE_M:
                at = li == len(edges) - 1
                pedge[pts[at]] = edges[-2]
                pfrac[pts[at]] = 1.0
                li = np.minimum(li, len(edges) - 2)
                edges = edges[:-1]
                f_last = 1.0
            sections.append(Section(edges=edges, f_first=f_first, f_last=f_last, points=pts))
            pidx[pts] = offset + li
            offset += len(edges)
        res = MatchResult(ptype, pedge, pfrac, plon, plat, pdist, psec, pidx, sections)
        self._interpolate(res, lon, lat, kept, np.diff(coff) > 0)
        return res

    def _interpolate(self, res: MatchResult, lon, lat, kept, has) -> None:
        """Project the points left out of the model onto the matched edges between their matched
        neighbours (vectorised over (point, edge, shape piece) triples)."""
        n = len(lon)
        matched = np.flatnonzero(res.type == MATCHED)
        if not len(matched):
            return
        is_kept = np.zeros(n, bool)
        is_kept[kept] = True
        todo = np.flatnonzero(~is_kept & has & (res.type == UNMATCHED))
        if not len(todo):
            return
        # previous / next matched point
        pos = np.searchsorted(matched, todo)
        prev = np.where(pos > 0, matched[np.maximum(pos - 1, 0)], -1)
        nxt = np.where(pos < len(matched), matched[np.minimum(pos, len(matched) - 1)], -1)
        has_prev = prev >= 0
        todo, prev, nxt = todo[has_prev], prev[has_prev], nxt[has_prev]
        if not len(todo):
            return
        same_sec = (nxt >= 0) & (res.section[np.maximum(nxt, 0)] == res.section[prev])
        lo_i = res.edge_index[prev]
        hi_i = np.where(same_sec, res.edge_index[np.maximum(nxt, 0)], lo_i)
        all_edges = res.edges
        cnt = hi_i - lo_i + 1
        owner = np.repeat(np.arange(len(todo)), cnt)
        eidx = np.repeat(lo_i, cnt) + (np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt))
        edge = all_edges[eidx]
        frac, dist, plon, plat = self._project(lon[todo][owner], lat[todo][owner], edge)
        # clamp to the neighbours' positions on the end edges
        lo_f = res.fraction[prev][owner]
        hi_f = np.where(same_sec, res.fraction[np.maximum(nxt, 0)], res.fraction[prev])[owner]
        first = eidx == lo_i[owner]
        last = eidx == hi_i[owner]
        clamp_lo = first & (frac < lo_f)
        clamp_hi = last & (frac > hi_f) & same_sec[owner]
        frac = np.where(clamp_lo, lo_f, frac)
        frac = np.where(clamp_hi & ~clamp_lo, hi_f, frac)
        order = np.lexsort((dist, owner))
        firsts = order[np.r_[True, owner[order][1:] != owner[order][:-1]]]
        pts = todo[owner[firsts]]
        res.type[pts] = INTERPOLATED
        res.edge[pts] = edge[firsts]
        res.fraction[pts] = frac[firsts]
        res.edge_index[pts] = eidx[firsts]
        res.section[pts] = res.section[prev][owner[firsts]]
        # positions after clamping
        clon, clat = self._point_at(edge[firsts], frac[firsts])
        res.lon[pts] = clon
        res.lat[pts] = clat
        res.distance[pts] = haversine_m(lat[pts], lon[pts], clat, clon)

    def _pieces(self, edge):
        seg = edge >> 1
        a = self._piece_first[seg]
        b = self._piece_first[seg + 1]
        cnt = b - a
        owner = np.repeat(np.arange(len(edge)), cnt)
        pid = np.repeat(a, cnt) + (np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt))
        return owner, pid

    def _project(self, plon, plat, edge):
        """Nearest position of point r on directed edge[r]: (fraction, metres, lon, lat)."""
        sn = self.snapper
        owner, pid = self._pieces(edge)
        a = sn.piece_a[pid]
        lon0, lat0 = plon[owner], plat[owner]
        m = M_PER_DEG
        coslat = np.cos(np.radians(lat0))
        x0 = (sn.lon[a] - lon0) * coslat * m
        y0 = (sn.lat[a] - lat0) * m
        dx = (sn.lon[a + 1] - sn.lon[a]) * coslat * m
        dy = (sn.lat[a + 1] - sn.lat[a]) * m
        dd = dx * dx + dy * dy
        t = np.where(dd > 0, np.clip(-(x0 * dx + y0 * dy) / np.where(dd > 0, dd, 1.0), 0.0, 1.0), 0.0)
        d = np.hypot(x0 + t * dx, y0 + t * dy)
        order = np.lexsort((d, owner))
        best = order[np.r_[True, owner[order][1:] != owner[order][:-1]]]
        seg = edge >> 1
        f = np.clip((sn.piece_cum[pid[best]] + t[best] * sn.piece_len[pid[best]]) / sn.seg_len[seg], 0.0, 1.0)
        f = np.where(edge & 1, 1.0 - f, f)
        ab = a[best]
        lon_ = sn.lon[ab] + t[best] * (sn.lon[ab + 1] - sn.lon[ab])
        lat_ = sn.lat[ab] + t[best] * (sn.lat[ab + 1] - sn.lat[ab])
        return f, d[best], lon_, lat_

    def _point_at(self, edge, frac):
        """(lon, lat) at fraction `frac` along directed edges (vectorised)."""
        sn = self.snapper
        seg = edge >> 1
        fs = np.where(edge & 1, 1.0 - frac, frac) * sn.seg_len[seg]  # metres along the segment's own direction
        owner, pid = self._pieces(edge)
        end = sn.piece_cum[pid] + sn.piece_len[pid]
        inside = (end >= fs[owner]) | (pid == self._piece_first[seg + 1][owner] - 1)
        order = np.lexsort((pid, ~inside, owner))
        best = order[np.r_[True, owner[order][1:] != owner[order][:-1]]]
        p = pid[best]
        a = sn.piece_a[p]
        t = np.clip((fs - sn.piece_cum[p]) / np.maximum(sn.piece_len[p], 1e-9), 0.0, 1.0)
        return sn.lon[a] + t * (sn.lon[a + 1] - sn.lon[a]), sn.lat[a] + t * (sn.lat[a + 1] - sn.lat[a])
