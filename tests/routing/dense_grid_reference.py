"""The dense snapping grids as they were before routing/snapgrid.py (verbatim copies of routing/fastsnap.py
and of the grid of routing/matching.py at 5661785), kept only as the reference of the differential test
tests/routing/test_snapgrid.py while the sparse grid replaces them."""

from __future__ import annotations

import numba
import numpy as np

from geoengine.errors import FieldError, Unsnappable, field_path
from geoengine.routing.snap import _M_PER_DEG, DEFAULT_RADII, MAX_DEFAULT_RADIUS

CELL_M = 100.0
_RADII = np.asarray(DEFAULT_RADII, dtype=np.float64)


@numba.njit(cache=True, nogil=True)
def _grid_build(lon, lat, piece_a, lon0, lat0, cw, ch, nx, ny):
    n = piece_a.shape[0]
    cnt = np.zeros(nx * ny + 1, np.int64)
    for p in range(n):
        a = piece_a[p]
        x0 = int((min(lon[a], lon[a + 1]) - lon0) / cw)
        x1 = int((max(lon[a], lon[a + 1]) - lon0) / cw)
        y0 = int((min(lat[a], lat[a + 1]) - lat0) / ch)
        y1 = int((max(lat[a], lat[a + 1]) - lat0) / ch)
        for y in range(max(y0, 0), min(y1, ny - 1) + 1):
            for x in range(max(x0, 0), min(x1, nx - 1) + 1):
                cnt[y * nx + x + 1] += 1
    for i in range(nx * ny):
        cnt[i + 1] += cnt[i]
    fill = cnt[:-1].copy()
    items = np.empty(cnt[-1], np.int64)
    for p in range(n):
        a = piece_a[p]
        x0 = int((min(lon[a], lon[a + 1]) - lon0) / cw)
        x1 = int((max(lon[a], lon[a + 1]) - lon0) / cw)
        y0 = int((min(lat[a], lat[a + 1]) - lat0) / ch)
        y1 = int((max(lat[a], lat[a + 1]) - lat0) / ch)
        for y in range(max(y0, 0), min(y1, ny - 1) + 1):
            for x in range(max(x0, 0), min(x1, nx - 1) + 1):
                c = y * nx + x
                items[fill[c]] = p
                fill[c] += 1
    return cnt, items


@numba.njit(cache=True, nogil=True)
def _gather(px, py, radius, cell_off, items, lon0, lat0, cw, ch, nx, ny, lon, lat, piece_a, piece_seg, piece_cum,
            piece_len, seg_len, usable, comp, use_comp, want_comp, seen, stamp):
    """Candidates of one point within `radius`: per segment its nearest piece, both directions, filtered
    by `usable` (and by comp == want_comp when use_comp). Returns arrays (edge, fraction, lon, lat, dist)."""
    coslat = np.cos(np.radians(py))
    dlat = radius / _M_PER_DEG
    dlon = radius / (_M_PER_DEG * max(coslat, 1e-6))
    x0 = max(int((px - dlon - lon0) / cw), 0)
    x1 = min(int((px + dlon - lon0) / cw), nx - 1)
    y0 = max(int((py - dlat - lat0) / ch), 0)
    y1 = min(int((py + dlat - lat0) / ch), ny - 1)
    # best piece per segment (segments met several times keep the nearest)
    cap = 64
    segs = np.empty(cap, np.int64)
    dists = np.empty(cap)
    ts = np.empty(cap)
    pcs = np.empty(cap, np.int64)
    m = 0
    stamp[0] += 1
    st = stamp[0]
    if px + dlon < lon0 or px - dlon > lon0 + cw * nx or py + dlat < lat0 or py - dlat > lat0 + ch * ny:
        x1 = x0 - 1
    for y in range(y0, y1 + 1):
        for x in range(x0, x1 + 1):
            c = y * nx + x
            for k in range(cell_off[c], cell_off[c + 1]):
                p = items[k]
                a = piece_a[p]
                bx0 = (lon[a] - px) * coslat * _M_PER_DEG
                by0 = (lat[a] - py) * _M_PER_DEG
                dx = (lon[a + 1] - lon[a]) * coslat * _M_PER_DEG
                dy = (lat[a + 1] - lat[a]) * _M_PER_DEG
                dd = dx * dx + dy * dy
                t = 0.0
                if dd > 0:
                    t = -(bx0 * dx + by0 * dy) / dd
                    t = min(max(t, 0.0), 1.0)
                ex = bx0 + t * dx
                ey = by0 + t * dy
                dist = np.sqrt(ex * ex + ey * ey)
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
def _candidates_many(pxs, pys, rads, default_radii, cell_off, items, lon0, lat0, cw, ch, nx, ny, lon, lat, piece_a,
                     piece_seg, piece_cum, piece_len, seg_len, usable, comp, use_comp, seen, stamp, slack, kmax):
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
        e, f, lo, la, d = _gather(pxs[i], pys[i], radii[0], cell_off, items, lon0, lat0, cw, ch, nx, ny, lon, lat,
                                  piece_a, piece_seg, piece_cum, piece_len, seg_len, usable, c, use_comp, True,
                                  seen, stamp)
        ie, i_f, ilo, ila, idd = e[:0], f[:0], lo[:0], la[:0], d[:0]
        island = False
        found = e.shape[0] > 0
        for r_i in range(radii.shape[0]):
            if r_i > 0:
                e, f, lo, la, d = _gather(pxs[i], pys[i], radii[r_i], cell_off, items, lon0, lat0, cw, ch, nx, ny,
                                          lon, lat, piece_a, piece_seg, piece_cum, piece_len, seg_len, usable, c,
                                          use_comp, True, seen, stamp)
                found = e.shape[0] > 0
            if found:
                break
            if use_comp and not island:
                ie, i_f, ilo, ila, idd = _gather(pxs[i], pys[i], radii[r_i], cell_off, items, lon0, lat0, cw, ch,
                                                 nx, ny, lon, lat, piece_a, piece_seg, piece_cum, piece_len,
                                                 seg_len, usable, c, True, False, seen, stamp)
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
    """Grid over a `Snapper`'s pieces; `candidates(lon, lat, radius, usable, comp)` as in snap_many."""

    def __init__(self, snapper):
        g = snapper.graph
        self.lon = np.ascontiguousarray(snapper.lon, dtype=np.float64)
        self.lat = np.ascontiguousarray(snapper.lat, dtype=np.float64)
        self.piece_a = np.ascontiguousarray(snapper.piece_a, dtype=np.int64)
        self.piece_seg = np.ascontiguousarray(snapper.piece_seg, dtype=np.int64)
        self.piece_cum = np.ascontiguousarray(snapper.piece_cum, dtype=np.float64)
        self.piece_len = np.ascontiguousarray(snapper.piece_len, dtype=np.float64)
        self.seg_len = np.ascontiguousarray(snapper.seg_len, dtype=np.float64)
        n_seg = int(np.asarray(g.seg_length).shape[0])
        if len(self.lon):
            self.lon0, self.lat0 = float(self.lon.min()) - 1e-6, float(self.lat.min()) - 1e-6
            mid = float(np.radians((self.lat.min() + self.lat.max()) / 2))
            self.ch = CELL_M / _M_PER_DEG
            self.cw = CELL_M / (_M_PER_DEG * max(np.cos(mid), 1e-6))
            self.nx = int((self.lon.max() - self.lon0) / self.cw) + 1
            self.ny = int((self.lat.max() - self.lat0) / self.ch) + 1
        else:
            self.lon0 = self.lat0 = 0.0
            self.cw = self.ch = 1.0
            self.nx = self.ny = 1
        self.cell_off, self.items = _grid_build(self.lon, self.lat, self.piece_a, self.lon0, self.lat0, self.cw,
                                                self.ch, self.nx, self.ny)
        self.n_seg = n_seg
        import threading

        self._local = threading.local()

    def _ws(self):
        ws = getattr(self._local, "ws", None)
        if ws is None:
            ws = (np.zeros(self.n_seg, np.int64), np.zeros(1, np.int64))
            self._local.ws = ws
        return ws

    def _gather(self, lon, lat, radius, usable, comp, use_comp, want):
        seen, stamp = self._ws()
        return _gather(lon, lat, radius, self.cell_off, self.items, self.lon0, self.lat0, self.cw, self.ch, self.nx,
                       self.ny, self.lon, self.lat, self.piece_a, self.piece_seg, self.piece_cum, self.piece_len,
                       self.seg_len, usable, comp, use_comp, want, seen, stamp)

    def candidates_many(self, lons: np.ndarray, lats: np.ndarray, radii: np.ndarray, usable: np.ndarray,
                        comp: np.ndarray | None, slack: float, kmax: int):
        """`candidates` of many points in one kernel call (radii[i] NaN: the default radii), each cut to
        the candidates within `slack` metres of its nearest, at most `kmax`: (edge, fraction, lon, lat,
        distance) flat arrays, ptr int64[n+1] and ok bool[n] (False: nothing in reach)."""
        seen, stamp = self._ws()
        use_comp = comp is not None
        return _candidates_many(np.ascontiguousarray(lons, dtype=np.float64),
                                np.ascontiguousarray(lats, dtype=np.float64),
                                np.ascontiguousarray(radii, dtype=np.float64), _RADII, self.cell_off, self.items,
                                self.lon0, self.lat0, self.cw, self.ch, self.nx, self.ny, self.lon, self.lat,
                                self.piece_a, self.piece_seg, self.piece_cum, self.piece_len, self.seg_len, usable,
                                comp if use_comp else usable, use_comp, seen, stamp, float(slack), int(kmax))

    def candidates(self, lon: float, lat: float, radius, usable: np.ndarray, comp: np.ndarray | None,
                   index: int, field: str):
        """(edge, fraction, lon, lat, distance) ranked by distance, of one plain location; raises
        Unsnappable naming `{field}[{index}]` as Snapper does."""
        radii = _RADII if radius is None or not np.isfinite(radius) else np.array([float(radius)])
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


# -- the grid of routing/matching.py -----------------------------------------------------------------

@numba.njit(cache=True, nogil=True)
def _m_grid_build(ax, ay, bx, by, x0, y0, cw, ch, nx, ny):
    """CSR cell -> piece ids of a uniform lon/lat grid (a piece is listed in every cell its bbox meets)."""
    m = ax.shape[0]
    cnt = np.zeros(nx * ny + 1, np.int64)
    for p in range(m):
        i0 = min(max(int((min(ax[p], bx[p]) - x0) / cw), 0), nx - 1)
        i1 = min(max(int((max(ax[p], bx[p]) - x0) / cw), 0), nx - 1)
        j0 = min(max(int((min(ay[p], by[p]) - y0) / ch), 0), ny - 1)
        j1 = min(max(int((max(ay[p], by[p]) - y0) / ch), 0), ny - 1)
        for j in range(j0, j1 + 1):
            for i in range(i0, i1 + 1):
                cnt[j * nx + i + 1] += 1
    for c in range(nx * ny):
        cnt[c + 1] += cnt[c]
    fill = cnt[:-1].copy()
    items = np.empty(cnt[-1], np.int64)
    for p in range(m):
        i0 = min(max(int((min(ax[p], bx[p]) - x0) / cw), 0), nx - 1)
        i1 = min(max(int((max(ax[p], bx[p]) - x0) / cw), 0), nx - 1)
        j0 = min(max(int((min(ay[p], by[p]) - y0) / ch), 0), ny - 1)
        j1 = min(max(int((max(ay[p], by[p]) - y0) / ch), 0), ny - 1)
        for j in range(j0, j1 + 1):
            for i in range(i0, i1 + 1):
                c = j * nx + i
                items[fill[c]] = p
                fill[c] += 1
    return cnt, items


@numba.njit(cache=True, nogil=True)
def _m_grid_candidates(plon, plat, radius, k_max, usable, cell_off, cell_items, x0, y0, cw, ch, nx, ny, piece_a,
                     piece_seg, piece_cum, piece_len, seg_len, slon, slat, mpd, stamp, ctr):
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
    for q in range(n):
        cur += 1
        lon0 = plon[q]
        lat0 = plat[q]
        coslat = np.cos(np.radians(lat0))
        dlat = radius / mpd
        dlon = radius / (mpd * max(coslat, 1e-6))
        i0 = min(max(int((lon0 - dlon - x0) / cw), 0), nx - 1)
        i1 = min(max(int((lon0 + dlon - x0) / cw), 0), nx - 1)
        j0 = min(max(int((lat0 - dlat - y0) / ch), 0), ny - 1)
        j1 = min(max(int((lat0 + dlat - y0) / ch), 0), ny - 1)
        k = 0
        for j in range(j0, j1 + 1):
            for i in range(i0, i1 + 1):
                c = j * nx + i
                for r in range(cell_off[c], cell_off[c + 1]):
                    p = cell_items[r]
                    if stamp[p] == cur:
                        continue
                    stamp[p] = cur
                    s = piece_seg[p]
                    if not (usable[2 * s] or usable[2 * s + 1]):
                        continue
                    a = piece_a[p]
                    xa = (slon[a] - lon0) * coslat * mpd
                    ya = (slat[a] - lat0) * mpd
                    dx = (slon[a + 1] - slon[a]) * coslat * mpd
                    dy = (slat[a + 1] - slat[a]) * mpd
                    dd = dx * dx + dy * dy
                    t = 0.0
                    if dd > 0:
                        t = min(max(-(xa * dx + ya * dy) / dd, 0.0), 1.0)
                    px = xa + t * dx
                    py = ya + t * dy
                    d = np.sqrt(px * px + py * py)
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


def matching_candidates(matcher, prof, lon, lat, radius, k_max):
    """Matcher._candidates as it was, over its own dense grid (at most 2048 cells a side)."""
    sn = matcher.snapper
    a = np.ascontiguousarray(sn.piece_a, dtype=np.int64)
    slon = np.ascontiguousarray(sn.lon, dtype=np.float64)
    slat = np.ascontiguousarray(sn.lat, dtype=np.float64)
    x0, x1 = float(slon.min()), float(slon.max())
    y0, y1 = float(slat.min()), float(slat.max())
    coslat = max(np.cos(np.radians(max(abs(y0), abs(y1)))), 0.05)
    ch = max(100.0 / _M_PER_DEG, (y1 - y0) / 2048)
    cw = max(100.0 / (_M_PER_DEG * coslat), (x1 - x0) / 2048)
    nx = int((x1 - x0) / cw) + 1
    ny = int((y1 - y0) / ch) + 1
    off, items = _m_grid_build(slon[a], slat[a], slon[a + 1], slat[a + 1], x0, y0, cw, ch, nx, ny)
    pstamp = np.zeros(max(len(a), 1), np.int64)
    return _m_grid_candidates(np.ascontiguousarray(lon), np.ascontiguousarray(lat), float(radius), int(k_max),
                              np.ascontiguousarray(prof.usable), off, items, x0, y0, cw, ch, nx, ny, a,
                              np.ascontiguousarray(sn.piece_seg, dtype=np.int64),
                              np.ascontiguousarray(sn.piece_cum, dtype=np.float64),
                              np.ascontiguousarray(sn.piece_len, dtype=np.float64),
                              np.ascontiguousarray(sn.seg_len, dtype=np.float64), slon, slat, _M_PER_DEG, pstamp,
                              np.zeros(1, np.int64))
