"""Snapping fast path for plain locations (no heading, side or street hint): the snapping grid
(routing/snapgrid.py, the same shape pieces `Snapper` indexes) searched by one Numba kernel per call.

Same rules and formulas as `Snapper.snap_many` (nearest piece per segment, local equirectangular
metres, radii grown through DEFAULT_RADII unless the location gives search_radius, the costing's
access mask, candidates of the largest component preferred and an island only as a fallback), so it
returns the same candidates; it exists because the R-tree query and the numpy steps around it cost
about 0.2 ms per route, more than the contraction-hierarchy search itself.
"""

from __future__ import annotations

import threading

import numba
import numpy as np

from geoengine.errors import FieldError, Unsnappable, field_path
from geoengine.geo import M_PER_DEG
from geoengine.routing.snap import DEFAULT_RADII, MAX_DEFAULT_RADIUS
from geoengine.routing.snapgrid import box_cells, cell_items, project

#: DEFAULT_RADII as the kernels take them
RADII = np.asarray(DEFAULT_RADII, dtype=np.float64)


@numba.njit(cache=True, nogil=True)
def _gather(px, py, radius, G, lon, lat, piece_a, piece_seg, piece_cum, piece_len, seg_len, usable, comp, use_comp,
            want_comp, seen, stamp):
    """Candidates of one point within `radius`: per segment its nearest piece, both directions, filtered
    by `usable` (and by comp == want_comp when use_comp). Returns arrays (edge, fraction, lon, lat, dist)."""
    coslat = np.cos(np.radians(py))
    dlat = radius / M_PER_DEG
    dlon = radius / (M_PER_DEG * max(coslat, 1e-6))
    cells = box_cells(G, px - dlon, py - dlat, px + dlon, py + dlat)
    cell_off, items = cell_items(G)
    # best piece per segment (segments met several times keep the nearest)
    cap = 64
    segs = np.empty(cap, np.int64)
    dists = np.empty(cap)
    ts = np.empty(cap)
    pcs = np.empty(cap, np.int64)
    m = 0
    stamp[0] += 1
    st = stamp[0]
    for ci in range(cells.shape[0]):
        c = cells[ci]
        for k in range(cell_off[c], cell_off[c + 1]):
            p = items[k]
            t, dist = project(lon, lat, piece_a[p], px, py, coslat)
            if dist > radius:
                continue
            s = piece_seg[p]
            e0 = 2 * s
            if not (usable[e0] or usable[e0 + 1]):
                continue
            if seen[s] == st:  # already have this segment: keep the nearer piece
                for j in range(m):
                    if segs[j] == s:
                        if dist < dists[j] or (dist == dists[j] and p < pcs[j]):
                            dists[j] = dist
                            ts[j] = t
                            pcs[j] = p
                        break
                continue
            seen[s] = st
            if m == cap:
                cap *= 2
                segs2 = np.empty(cap, np.int64)
                d2 = np.empty(cap)
                t2 = np.empty(cap)
                p2 = np.empty(cap, np.int64)
                segs2[:m] = segs[:m]
                d2[:m] = dists[:m]
                t2[:m] = ts[:m]
                p2[:m] = pcs[:m]
                segs, dists, ts, pcs = segs2, d2, t2, p2
            segs[m] = s
            dists[m] = dist
            ts[m] = t
            pcs[m] = p
            m += 1
    out_e = np.empty(2 * m, np.int64)
    out_f = np.empty(2 * m)
    out_lo = np.empty(2 * m)
    out_la = np.empty(2 * m)
    out_d = np.empty(2 * m)
    q = 0
    for j in range(m):
        p = pcs[j]
        a = piece_a[p]
        s = segs[j]
        frac = (piece_cum[p] + ts[j] * piece_len[p]) / seg_len[s]
        frac = min(max(frac, 0.0), 1.0)
        slo = lon[a] + ts[j] * (lon[a + 1] - lon[a])
        sla = lat[a] + ts[j] * (lat[a + 1] - lat[a])
        for side in range(2):
            e = 2 * s + side
            if not usable[e]:
                continue
            if use_comp and comp[e] != want_comp:
                continue
            out_e[q] = e
            out_f[q] = frac if side == 0 else 1.0 - frac
            out_lo[q] = slo
            out_la[q] = sla
            out_d[q] = dists[j]
            q += 1
    # rank by (distance rounded to mm, edge), as Snapper does
    key = np.empty(q)
    for j in range(q):
        key[j] = np.round(out_d[j] * 1000.0) * 4294967296.0 + out_e[j]
    order = np.argsort(key, kind="mergesort")
    return out_e[order], out_f[order], out_lo[order], out_la[order], out_d[order]


@numba.njit(cache=True, nogil=True)
def candidates_many_kernel(pxs, pys, rads, default_radii, G, lon, lat, piece_a, piece_seg, piece_cum, piece_len,
                           seg_len, usable, comp, use_comp, seen, stamp, slack, kmax):
    """`GridSnapper.candidates` of many points in one call (rads[i] NaN: the default radii), each point's
    candidates cut to those within `slack` metres of its nearest, at most `kmax`. Returns flat arrays
    (edge, fraction, lon, lat, distance), ptr int64[n+1] (point i: [ptr[i], ptr[i+1])) and ok bool[n]."""
    n = pxs.shape[0]
    cap = max(16, 4 * n)
    E = np.empty(cap, np.int64)
    F = np.empty(cap)
    LO = np.empty(cap)
    LA = np.empty(cap)
    D = np.empty(cap)
    ptr = np.zeros(n + 1, np.int64)
    ok = np.zeros(n, np.bool_)
    c = comp if use_comp else usable
    m = 0
    for i in range(n):
        radii = default_radii if np.isnan(rads[i]) else rads[i:i + 1]
        e, f, lo, la, d = _gather(pxs[i], pys[i], radii[0], G, lon, lat, piece_a, piece_seg, piece_cum, piece_len,
                                  seg_len, usable, c, use_comp, True, seen, stamp)
        ie, i_f, ilo, ila, idd = e[:0], f[:0], lo[:0], la[:0], d[:0]
        island = False
        found = e.shape[0] > 0
        for r_i in range(radii.shape[0]):
            if r_i > 0:
                e, f, lo, la, d = _gather(pxs[i], pys[i], radii[r_i], G, lon, lat, piece_a, piece_seg, piece_cum,
                                          piece_len, seg_len, usable, c, use_comp, True, seen, stamp)
                found = e.shape[0] > 0
            if found:
                break
            if use_comp and not island:
                ie, i_f, ilo, ila, idd = _gather(pxs[i], pys[i], radii[r_i], G, lon, lat, piece_a, piece_seg,
                                                 piece_cum, piece_len, seg_len, usable, c, True, False, seen, stamp)
                island = ie.shape[0] > 0
        if not found and island:
            e, f, lo, la, d = ie, i_f, ilo, ila, idd
            found = True
        if found:
            k = min(np.searchsorted(d, d[0] + slack, side="right"), kmax)
            if m + k > cap:
                cap = 2 * (m + k)
                E2 = np.empty(cap, np.int64)
                F2 = np.empty(cap)
                LO2 = np.empty(cap)
                LA2 = np.empty(cap)
                D2 = np.empty(cap)
                E2[:m] = E[:m]
                F2[:m] = F[:m]
                LO2[:m] = LO[:m]
                LA2[:m] = LA[:m]
                D2[:m] = D[:m]
                E, F, LO, LA, D = E2, F2, LO2, LA2, D2
            E[m:m + k] = e[:k]
            F[m:m + k] = f[:k]
            LO[m:m + k] = lo[:k]
            LA[m:m + k] = la[:k]
            D[m:m + k] = d[:k]
            m += k
            ok[i] = True
        ptr[i + 1] = m
    return E[:m], F[:m], LO[:m], LA[:m], D[:m], ptr, ok


class GridSnapper:
    """The snapping grid of a `Snapper`'s pieces (`snapper.grid`, routing/snapgrid.py) with the fast
    path's rules: `candidates(lon, lat, radius, usable, comp, ...)` as in snap_many, `candidates_many`
    for many points in one kernel call."""

    def __init__(self, snapper):
        self.lon = np.ascontiguousarray(snapper.lon, dtype=np.float64)
        self.lat = np.ascontiguousarray(snapper.lat, dtype=np.float64)
        self.piece_a = np.ascontiguousarray(snapper.piece_a, dtype=np.int64)
        self.piece_seg = np.ascontiguousarray(snapper.piece_seg, dtype=np.int64)
        self.piece_cum = np.ascontiguousarray(snapper.piece_cum, dtype=np.float64)
        self.piece_len = np.ascontiguousarray(snapper.piece_len, dtype=np.float64)
        self.seg_len = np.ascontiguousarray(snapper.seg_len, dtype=np.float64)
        self.grid = snapper.grid
        self.n_seg = int(np.asarray(snapper.graph.seg_length).shape[0])
        self._local = threading.local()

    @property
    def arrays(self) -> tuple:
        """The kernels' leading arguments: (grid tuple, lon, lat, piece_a, piece_seg, piece_cum, piece_len,
        seg_len)."""
        return (self.grid.arrays, self.lon, self.lat, self.piece_a, self.piece_seg, self.piece_cum, self.piece_len,
                self.seg_len)

    def workspace(self):
        ws = getattr(self._local, "ws", None)
        if ws is None:
            ws = (np.zeros(self.n_seg, np.int64), np.zeros(1, np.int64))
            self._local.ws = ws
        return ws

    def _gather(self, lon, lat, radius, usable, comp, use_comp, want):
        seen, stamp = self.workspace()
        return _gather(lon, lat, radius, *self.arrays, usable, comp, use_comp, want, seen, stamp)

    def candidates_many(self, lons: np.ndarray, lats: np.ndarray, radii: np.ndarray, usable: np.ndarray,
                        comp: np.ndarray | None, slack: float, kmax: int):
        """`candidates` of many points in one kernel call (radii[i] NaN: the default radii), each cut to
        the candidates within `slack` metres of its nearest, at most `kmax`: (edge, fraction, lon, lat,
        distance) flat arrays, ptr int64[n+1] and ok bool[n] (False: nothing in reach)."""
        seen, stamp = self.workspace()
        use_comp = comp is not None
        return candidates_many_kernel(np.ascontiguousarray(lons, dtype=np.float64),
                                      np.ascontiguousarray(lats, dtype=np.float64),
                                      np.ascontiguousarray(radii, dtype=np.float64), RADII, *self.arrays, usable,
                                      comp if use_comp else usable, use_comp, seen, stamp, float(slack), int(kmax))

    def candidates(self, lon: float, lat: float, radius, usable: np.ndarray, comp: np.ndarray | None,
                   index: int, field: str):
        """(edge, fraction, lon, lat, distance) ranked by distance, of one plain location; raises
        Unsnappable naming `{field}[{index}]` as Snapper does."""
        radii = RADII if radius is None or not np.isfinite(radius) else np.array([float(radius)])
        use_comp = comp is not None
        c = comp if use_comp else usable
        island = None
        for r in radii:
            got = self._gather(float(lon), float(lat), float(r), usable, c, use_comp, True)
            if len(got[0]):
                return got
            if use_comp and island is None:
                other = self._gather(float(lon), float(lat), float(r), usable, c, True, False)
                if len(other[0]):
                    island = other
        if island is not None:
            return island
        reach = radii[-1] if radius is not None and np.isfinite(radius) else MAX_DEFAULT_RADIUS
        where = field_path(field, index)
        raise Unsnappable(
            f"{where} ({lon:.6f}, {lat:.6f}) has no road the costing may use within {reach:g} m",
            errors=[FieldError(where, f"no routable edge within {reach:g} m")],
        )
