"""The snapping grid (routing/snapgrid.py) and the two kernels that read it: the fast path's candidates
(routing/fastsnap.py) and map matching's (routing/matching.py), on thousands of real points of Andorra and
Liechtenstein (the search documents' positions: addresses, POIs, streets; and shape points moved up to a
few hundred metres), against a brute-force numpy computation over every piece of the graph."""

from __future__ import annotations

import numpy as np
import pytest

from geoengine.errors import Unsnappable
from geoengine.routing.snap import _M_PER_DEG, DEFAULT_RADII
from geoengine.routing.snapgrid import PieceGrid, box_cells

REGIONS = ("andorra", "liechtenstein")
N_POINTS = 2500


@pytest.fixture(scope="module", params=REGIONS)
def engine(request, engine_for):
    return engine_for(request.param)


def real_points(engine, n: int, seed: int) -> np.ndarray:
    """(n, 2) lon/lat: half the search documents' positions, half shape points moved by up to ~300 m."""
    rng = np.random.default_rng(seed)
    idx = engine.search_index
    docs = np.column_stack([np.asarray(idx._lon, dtype=np.float64), np.asarray(idx._lat, dtype=np.float64)])
    docs = docs[rng.choice(len(docs), min(n // 2, len(docs)), replace=False)]
    g = engine.graph
    lon, lat = np.asarray(g.shape_lon), np.asarray(g.shape_lat)
    k = rng.choice(len(lon), n - len(docs))
    r = rng.uniform(0, 300, len(k)) * rng.choice([0.05, 0.3, 1.0], len(k))
    a = rng.uniform(0, 2 * np.pi, len(k))
    moved = np.column_stack([lon[k] + r * np.sin(a) / (_M_PER_DEG * np.cos(np.radians(lat[k]))),
                             lat[k] + r * np.cos(a) / _M_PER_DEG])
    return np.vstack([docs, moved])


class Brute:
    """Every piece's projection of one point, in the kernels' formulas (local equirectangular metres)."""

    def __init__(self, snapper):
        self.sn = snapper
        self.lon = np.asarray(snapper.lon, dtype=np.float64)
        self.lat = np.asarray(snapper.lat, dtype=np.float64)
        self.a = np.asarray(snapper.piece_a, dtype=np.int64)
        self.seg = np.asarray(snapper.piece_seg, dtype=np.int64)

    def project(self, px, py):
        a, lon, lat = self.a, self.lon, self.lat
        coslat = np.cos(np.radians(py))
        bx0 = (lon[a] - px) * coslat * _M_PER_DEG
        by0 = (lat[a] - py) * _M_PER_DEG
        dx = (lon[a + 1] - lon[a]) * coslat * _M_PER_DEG
        dy = (lat[a + 1] - lat[a]) * _M_PER_DEG
        dd = dx * dx + dy * dy
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(dd > 0, np.minimum(np.maximum(-(bx0 * dx + by0 * dy) / dd, 0.0), 1.0), 0.0)
        ex, ey = bx0 + t * dx, by0 + t * dy
        return t, np.sqrt(ex * ex + ey * ey)

    def _directed(self, p, t, d, usable, comp, want):
        """Two directed candidates of each piece p (its segment's position), usable and, with comp, in
        comp == want."""
        sn = self.sn
        s = self.seg[p]
        frac = np.clip((sn.piece_cum[p] + t * sn.piece_len[p]) / sn.seg_len[s], 0.0, 1.0)
        a = self.a[p]
        slo = self.lon[a] + t * (self.lon[a + 1] - self.lon[a])
        sla = self.lat[a] + t * (self.lat[a + 1] - self.lat[a])
        e = np.column_stack([2 * s, 2 * s + 1]).ravel()
        f = np.column_stack([frac, 1.0 - frac]).ravel()
        rep = lambda v: np.repeat(v, 2)  # noqa: E731
        lo, la, dist = rep(slo), rep(sla), rep(d)
        ok = usable[e]
        if comp is not None:
            ok &= comp[e] == want
        return e[ok], f[ok], lo[ok], la[ok], dist[ok]

    def fast(self, px, py, radius, usable, comp):
        """The fast path's rules (Snapper.snap_many's): the nearest piece of every segment with a usable
        direction, the radius grown through DEFAULT_RADII (or `radius` alone), the component preferred and
        an island as the fallback; ranked by (distance rounded to mm, edge). None: nothing in reach."""
        t, d = self.project(px, py)
        seg = self.seg
        live = usable[2 * seg] | usable[2 * seg + 1]
        radii = DEFAULT_RADII if radius is None else (radius,)
        near = live & (d <= radii[-1])
        p = np.flatnonzero(near)
        order = np.lexsort((p, d[p], seg[p]))  # per segment: nearest, then the lower piece id
        p = p[order]
        best = p[np.r_[True, seg[p][1:] != seg[p][:-1]]] if len(p) else p
        island = None
        for r in radii:
            q = best[d[best] <= r]
            got = self._directed(q, t[q], d[q], usable, comp, True)
            if len(got[0]):
                return self._rank(got)
            if comp is not None and island is None:
                other = self._directed(q, t[q], d[q], usable, comp, False)
                if len(other[0]):
                    island = other
        return None if island is None else self._rank(island)

    @staticmethod
    def _rank(got):
        e, f, lo, la, d = got
        order = np.lexsort((e, np.round(d * 1000.0)))
        return e[order], f[order], lo[order], la[order], d[order]

    def matching(self, px, py, radius, usable, k_max):
        """Map matching's candidates: every local minimum of the distance along a segment's pieces within
        `radius`, both usable directions, nearest first (stable), at most k_max."""
        t, d = self.project(px, py)
        seg = self.seg
        p = np.flatnonzero((usable[2 * seg] | usable[2 * seg + 1]) & (d <= radius))
        keep = np.ones(len(p), bool)
        for z in range(len(p)):  # a few tens of pieces
            if z > 0 and p[z - 1] == p[z] - 1 and seg[p[z] - 1] == seg[p[z]] and not d[p[z]] < d[p[z - 1]]:
                keep[z] = False
            if z < len(p) - 1 and p[z + 1] == p[z] + 1 and seg[p[z] + 1] == seg[p[z]] and not d[p[z]] <= d[p[z + 1]]:
                keep[z] = False
        p = p[keep]
        e, f, lo, la, dist = self._directed(p, t[p], d[p], usable, None, True)
        order = np.argsort(dist, kind="mergesort")[:k_max]
        return e[order], f[order], lo[order], la[order], dist[order]


def _same(got, want):
    assert got[0].tolist() == want[0].tolist()
    for a, b in zip(got[1:], want[1:], strict=True):
        assert np.allclose(a, b, rtol=0, atol=1e-9)


def test_fast_path_equals_brute_force(engine):
    """GridSnapper.candidates and candidates_many (the route, matrix and batch path) give exactly the
    brute-force candidates, with and without the component preference, default and strict radii."""
    router = engine.router
    brute = Brute(router.snapper)
    pts = real_points(engine, N_POINTS, seed=7)
    for costing in ("auto", "pedestrian"):
        prof = router.profile(costing)
        for comp in (prof.component, None):
            radii = np.where(np.arange(len(pts)) % 5 == 0, 20.0, np.nan)
            for k, (lon, lat) in enumerate(pts[: N_POINTS // 2 if costing == "auto" else 400]):
                radius = None if np.isnan(radii[k]) else float(radii[k])
                want = brute.fast(lon, lat, radius, prof.usable, comp)
                if want is None:
                    with pytest.raises(Unsnappable):
                        router.grid.candidates(lon, lat, radius, prof.usable, comp, k, "locations")
                    continue
                _same(router.grid.candidates(lon, lat, radius, prof.usable, comp, k, "locations"), want)
            # many points in one kernel call: the same candidates, cut to the slack and kmax
            E, F, LO, LA, D, ptr, ok = router.grid.candidates_many(pts[:, 0], pts[:, 1], radii, prof.usable, comp,
                                                                   5.0, 4)
            for i in range(0, len(pts), 3):
                want = brute.fast(pts[i, 0], pts[i, 1], None if np.isnan(radii[i]) else radii[i], prof.usable, comp)
                assert ok[i] == (want is not None)
                if want is not None:
                    kk = min(int(np.searchsorted(want[4], want[4][0] + 5.0, side="right")), 4)
                    a, b = ptr[i], ptr[i + 1]
                    _same((E[a:b], F[a:b], LO[a:b], LA[a:b], D[a:b]), tuple(w[:kk] for w in want))


def test_matching_candidates_equal_brute_force(engine):
    """Map matching's candidates (local minima per segment, through the same grid) equal the brute force."""
    matcher = engine.matcher
    brute = Brute(engine.router.snapper)
    pts = real_points(engine, N_POINTS // 2, seed=11)
    for costing, radius in (("auto", 50.0), ("pedestrian", 120.0)):
        prof = engine.router.profile(costing)
        coff, ce, cf, clo, cla, cd = matcher._candidates(prof, pts[:, 0].copy(), pts[:, 1].copy(), radius, 12)
        for i in range(len(pts)):
            want = brute.matching(pts[i, 0], pts[i, 1], radius, prof.usable, 12)
            a, b = coff[i], coff[i + 1]
            _same((ce[a:b], cf[a:b], clo[a:b], cla[a:b], cd[a:b]), want)


def test_box_cells_find_every_piece_meeting_the_box(engine):
    """Every piece whose line meets a box is in a cell box_cells returns (boxes of 1 m to 5 km, and boxes
    far bigger than the data: the scan of the occupied cells)."""
    sn = engine.router.snapper
    grid = sn.grid
    G = grid.arrays
    cell_off, items = G[2], G[3]
    lon, lat, a = np.asarray(sn.lon), np.asarray(sn.lat), np.asarray(sn.piece_a)
    pts = real_points(engine, 300, seed=5)
    for k, (x, y) in enumerate(pts):
        half = [1.0, 50.0, 500.0, 5000.0, 5e6][k % 5] / _M_PER_DEG
        box = (x - half, y - half, x + half, y + half)
        cells = box_cells(G, *box)
        found = np.unique(np.concatenate([items[cell_off[c]:cell_off[c + 1]] for c in cells] or [np.zeros(0, int)]))
        # pieces meeting the box: sample each line finely (pieces are short next to these boxes)
        ts = np.linspace(0.0, 1.0, 33)
        xs = lon[a][:, None] + ts * (lon[a + 1] - lon[a])[:, None]
        ys = lat[a][:, None] + ts * (lat[a + 1] - lat[a])[:, None]
        inside = ((xs >= box[0]) & (xs <= box[2]) & (ys >= box[1]) & (ys <= box[3])).any(axis=1)
        assert np.isin(np.flatnonzero(inside), found).all()


def test_grid_size_follows_the_pieces_not_the_box(liechtenstein):
    """Liechtenstein's pieces and a copy of them moved to Alabama (96 degrees west, 15 south) make a grid
    the size of the two parts' grids built alone (within 1.2x: cells are as wide in degrees everywhere,
    set at the median latitude), and both copies are found; a piece hundreds of km long is
    listed in the cells along its line, not in every cell of its box."""
    sn = liechtenstein.router.snapper
    lon, lat, a = np.asarray(sn.lon), np.asarray(sn.lat), np.asarray(sn.piece_a)
    one, other = PieceGrid(lon, lat, a), PieceGrid(lon - 96.0, lat - 14.9, a)  # each part alone
    two = PieceGrid(np.r_[lon, lon - 96.0], np.r_[lat, lat - 14.9], np.r_[a, a + len(lon)])
    assert two.n_cells <= 1.2 * (one.n_cells + other.n_cells)
    assert two.nbytes <= 1.2 * (one.nbytes + other.nbytes)
    p = int(len(a) // 2)
    x, y = lon[a[p]], lat[a[p]]
    for dx, dy, off in ((0.0, 0.0, 0), (-96.0, -14.9, len(a))):
        cells = box_cells(two.arrays, x + dx - 1e-6, y + dy - 1e-6, x + dx + 1e-6, y + dy + 1e-6)
        got = np.concatenate([two.arrays[3][two.arrays[2][c]:two.arrays[2][c + 1]] for c in cells])
        assert p + off in got
    # one long diagonal piece (~450 km): the cells along its line, not the ~3000 x 3300 of its box
    ferry = PieceGrid(np.array([5.0, 9.0]), np.array([43.0, 46.0]), np.array([0]))
    assert ferry.n_cells < 30_000
    for t in np.linspace(0.0, 1.0, 101):
        px, py = 5.0 + 4.0 * t, 43.0 + 3.0 * t
        cells = box_cells(ferry.arrays, px - 1e-7, py - 1e-7, px + 1e-7, py + 1e-7)
        assert len(cells) >= 1
