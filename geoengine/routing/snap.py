"""Snapping: from a coordinate to ranked candidate positions on directed edges of the road graph.

An R-tree (rtree, bulk-loaded from numpy arrays) indexes every piece of every edge's shape (the line
between two consecutive shape points); `Snapper.grid`, the snapping grid (routing/snapgrid.py) over the
same pieces, serves the locations without hints (routing/fastsnap.py) and map matching. `Snapper(graph).snap(...)` queries it, projects the point on the
pieces found (local equirectangular metres), keeps the nearest piece per directed edge, and filters by
the costing's access mask, radius, heading and preferred side. Contract in `Snapper.snap`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from geoengine.errors import FieldError, InvalidRequest, Unsnappable, field_path
from geoengine.geo import EARTH_RADIUS_M, bearing_deg, haversine_m

# Radii (metres) tried in turn when the location gives no search_radius; the last is the maximum.
DEFAULT_RADII = (25.0, 50.0, 100.0, 200.0, 500.0)
MAX_DEFAULT_RADIUS = DEFAULT_RADII[-1]
DEFAULT_HEADING_TOLERANCE = 60.0
ON_LINE_M = 0.5  # a point this close to the centre line is on both sides
_M_PER_DEG = EARTH_RADIUS_M * np.pi / 180.0


@dataclass(frozen=True)
class Candidates:
    """Candidate positions, best first when ranked. Arrays of equal length:
    `edge` directed edge id (int64), `fraction` position along that edge in its own direction (0 start,
    1 end), `lon`/`lat` the snapped point, `distance` metres from the input, `bearing` degrees of the
    edge's direction at the snapped point. `radius` is the radius that found them; `relaxed` is True
    when heading or preferred_side matched no candidate and were therefore not applied."""

    edge: np.ndarray
    fraction: np.ndarray
    lon: np.ndarray
    lat: np.ndarray
    distance: np.ndarray
    bearing: np.ndarray
    radius: float
    relaxed: bool = False

    def __len__(self) -> int:
        return int(self.edge.shape[0])

    def best(self) -> dict:
        return {"edge": int(self.edge[0]), "fraction": float(self.fraction[0]), "lon": float(self.lon[0]),
                "lat": float(self.lat[0]), "distance": float(self.distance[0])}

    def remaining(self, edge_metric: np.ndarray) -> np.ndarray:
        """Per candidate, the part of `edge_metric[edge]` (cost, time or length) from the snapped point
        to the edge's end: `(1 - fraction) * edge_metric[edge]`. As a source this is the initial
        distance of vertex `edge` in the turn graph; as a target, subtract it from the distance the
        turn graph reports for vertex `edge` (which includes the whole edge). Source and target on the
        same edge with fraction_t >= fraction_s: `(fraction_t - fraction_s) * edge_metric[edge]`."""
        return (1.0 - self.fraction) * np.asarray(edge_metric)[self.edge]


@dataclass(frozen=True)
class CandidateSet:
    """Candidates of many locations in CSR form: location i owns rows offsets[i]:offsets[i+1] of the
    arrays (same meaning as in `Candidates`), nearest first."""

    offsets: np.ndarray
    edge: np.ndarray
    fraction: np.ndarray
    lon: np.ndarray
    lat: np.ndarray
    distance: np.ndarray
    bearing: np.ndarray

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    def best(self) -> dict[str, np.ndarray]:
        """Nearest candidate of every location: arrays edge, fraction, lon, lat, distance."""
        i = self.offsets[:-1]
        return {"edge": self.edge[i], "fraction": self.fraction[i], "lon": self.lon[i], "lat": self.lat[i],
                "distance": self.distance[i]}

    def of(self, i: int) -> Candidates:
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return Candidates(self.edge[a:b], self.fraction[a:b], self.lon[a:b], self.lat[a:b], self.distance[a:b],
                          self.bearing[a:b], radius=float("nan"))


def _angle_diff(a, b):
    return np.abs((np.asarray(a) - b + 180.0) % 360.0 - 180.0)


class Snapper:
    """Spatial index over the edge shapes of a `Graph` (built in memory from the bundle's arrays in a
    fraction of a second at first use; thread-safe)."""

    def __init__(self, graph):
        self.graph = graph
        off = np.asarray(graph.shape_offsets)
        lon = np.asarray(graph.shape_lon)
        lat = np.asarray(graph.shape_lat)
        n = len(lon)
        is_last = np.zeros(n, dtype=bool)
        is_last[off[1:] - 1] = True
        a = np.flatnonzero(~is_last)  # piece i: shape point a[i] -> a[i] + 1
        self.piece_a = a
        self.piece_seg = np.searchsorted(off, a, side="right") - 1
        plen = haversine_m(lat[a], lon[a], lat[a + 1], lon[a + 1])
        cum = np.cumsum(plen)
        seg_first_piece = np.searchsorted(self.piece_seg, np.arange(len(off) - 1), side="left")
        start_cum = np.r_[0.0, cum][seg_first_piece]
        self.piece_len = plen
        self.piece_cum = (cum - plen) - start_cum[self.piece_seg]  # length of the segment before the piece
        self.seg_len = np.maximum(np.asarray(graph.seg_length, dtype=np.float64), 1e-9)
        self.lon, self.lat = lon, lat
        mins = np.column_stack([np.minimum(lon[a], lon[a + 1]), np.minimum(lat[a], lat[a + 1])])
        maxs = np.column_stack([np.maximum(lon[a], lon[a + 1]), np.maximum(lat[a], lat[a + 1])])
        self._boxes = (np.ascontiguousarray(mins), np.ascontiguousarray(maxs))
        self._tree = None
        self._grid = None
        self._tree_lock = threading.Lock()
        self._lock = threading.Lock()

    @property
    def tree(self):
        """The R-tree over the shape pieces, built at its first use: locations without hints are snapped by
        the grid kernel (geoengine.routing.fastsnap), so a plain route in a fresh process never builds it."""
        if self._tree is None:
            with self._tree_lock:
                if self._tree is None:
                    from rtree import index as rtree_index

                    mins, maxs = self._boxes
                    props = rtree_index.Property()
                    props.dimension = 2
                    if len(mins):
                        ids = np.arange(len(mins), dtype=np.int64)
                        self._tree = rtree_index.Index((ids, mins, maxs), properties=props)
                    else:
                        self._tree = rtree_index.Index(properties=props)
        return self._tree

    @property
    def grid(self):
        """The snapping grid over the same pieces (`geoengine.routing.snapgrid.PieceGrid`), built at its
        first use; the fast path (routing/fastsnap.py) and map matching (routing/matching.py) read it."""
        if self._grid is None:
            with self._tree_lock:
                if self._grid is None:
                    from geoengine.routing.snapgrid import PieceGrid

                    self._grid = PieceGrid(self.lon, self.lat, self.piece_a)
        return self._grid

    def _query(self, lon0: float, lat0: float, radius: float) -> np.ndarray:
        dlat = radius / _M_PER_DEG
        dlon = radius / (_M_PER_DEG * max(np.cos(np.radians(lat0)), 1e-6))
        with self._lock:
            hits = self.tree.intersection((lon0 - dlon, lat0 - dlat, lon0 + dlon, lat0 + dlat))
            return np.fromiter(hits, dtype=np.int64)

    def snap(
        self,
        lon: float,
        lat: float,
        allowed_edges_mask: np.ndarray,
        search_radius: float | None = None,
        heading: float | None = None,
        heading_tolerance: float | None = None,
        preferred_side: str | None = None,
        rank_candidates: bool | None = True,
        street: str | None = None,
        *,
        component_mask: np.ndarray | None = None,
        index: int = 0,
        field: str = "locations",
        at_least: int = 1,
    ) -> Candidates:
        """Candidates for one location.

        Contract: `allowed_edges_mask` bool[E] (e.g. `np.isfinite(cost)` of the costing) limits the
        candidates to edges the mode may travel in their direction. `search_radius` (metres, 1-100)
        limits the search strictly; without it the radius grows through DEFAULT_RADII (25, 50, 100, 200,
        500 m) until something is found. `heading` (0-360, degrees clockwise from north) keeps edges whose
        bearing at the snapped point is within `heading_tolerance` (default 60) of it. `preferred_side`
        'same' keeps directed edges that have the location on their right (right-hand traffic: the
        driver's side), 'opposite' on their left, 'either' (default) both. When heading or side leave
        nothing within the largest radius, they are dropped (`relaxed`). `rank_candidates` True sorts
        by distance (then heading difference); False keeps every candidate in edge-id order (the router
        should then treat them as equal). `street` (a name hint) ranks candidates on an edge whose name
        or ref matches it (case-insensitive, fuzzy score >= 85) first. A point snapped within 1 m of a
        junction has no side. `component_mask` (bool[E], e.g. `geoengine.graph.turns.largest_component`)
        marks the well-connected edges: while the radius grows, candidates outside it are kept only as a
        fallback for when no candidate inside it is found. No candidate -> Unsnappable (422) naming
        `{field}[{index}]`.
        """
        if rank_candidates is None:
            rank_candidates = True
        where = field_path(field, index)
        if preferred_side not in (None, "same", "opposite", "either"):
            raise InvalidRequest.field(f"{where}.preferred_side", "must be one of same, opposite, either")
        if search_radius is not None and not (0 < search_radius <= 100):
            raise InvalidRequest.field(f"{where}.search_radius", "must be between 1 and 100 metres")
        if not (np.isfinite(lon) and np.isfinite(lat) and -180 <= lon <= 180 and -90 <= lat <= 90):
            raise InvalidRequest.field(where, "lon must be in [-180, 180] and lat in [-90, 90]")
        mask = np.asarray(allowed_edges_mask, dtype=bool)
        radii = (float(search_radius),) if search_radius is not None else DEFAULT_RADII
        tol = DEFAULT_HEADING_TOLERANCE if heading_tolerance is None else float(heading_tolerance)
        fallback = None
        island = None  # candidates found only outside component_mask
        for radius in radii:
            found = self._candidates(lon, lat, mask, radius)
            if found is None:
                continue
            if component_mask is not None:
                inside = np.asarray(component_mask, dtype=bool)[found["edge"]]
                if not inside.any():
                    island = island or (found, radius)
                    continue
                found = {k: v[inside] for k, v in found.items()}
            keep = np.ones(len(found["edge"]), dtype=bool)
            if heading is not None:
                keep &= _angle_diff(found["bearing"], float(heading) % 360.0) <= tol
            if preferred_side in ("same", "opposite"):
                right = found["side"] < 0
                along = found["fraction"] * self.seg_len[found["edge"] >> 1]
                at_node = (along < 1.0) | (self.seg_len[found["edge"] >> 1] - along < 1.0)
                on_line = (found["distance"] <= ON_LINE_M) | at_node
                keep &= on_line | (right if preferred_side == "same" else ~right)
            if keep.any():
                if at_least > 1 and radius != radii[-1] and len(np.unique(found["edge"][keep] >> 1)) < at_least:
                    continue  # a larger radius finds these and more
                return self._result(found, keep, radius, heading, rank_candidates, relaxed=False,
                                    street=self._street_match(found["edge"], street))
            fallback = (found, radius)
        if fallback is None and island is not None:
            found, radius = island
            keep = np.ones(len(found["edge"]), dtype=bool)
            if heading is not None:
                keep &= _angle_diff(found["bearing"], float(heading) % 360.0) <= tol
            relaxed = not keep.any()
            return self._result(found, keep if keep.any() else ~keep, radius, heading, rank_candidates,
                                relaxed=relaxed, street=self._street_match(found["edge"], street))
        if fallback is not None:
            found, radius = fallback
            return self._result(found, np.ones(len(found["edge"]), dtype=bool), radius, heading, rank_candidates,
                                relaxed=True, street=self._street_match(found["edge"], street))
        reach = radii[-1]
        raise Unsnappable(
            f"{where} ({lon:.6f}, {lat:.6f}) has no road the costing may use within {reach:g} m",
            errors=[FieldError(where, f"no routable edge within {reach:g} m")],
        )

    def snap_many(
        self,
        lons,
        lats,
        allowed_edges_mask: np.ndarray,
        search_radius=None,
        *,
        component_mask: np.ndarray | None = None,
        field: str = "locations",
    ) -> CandidateSet:
        """Candidates for many locations at once (matrix sources/targets): one vectorised R-tree query
        per radius step (`intersection_v`) and one numpy projection over all (point, piece) pairs.

        Contract: same rules as `snap` without heading/side (use `snap` per location for those):
        `search_radius` None (grow through DEFAULT_RADII), a number or an array (NaN = grow) of 1-100 m.
        Returns a `CandidateSet` (CSR: candidates of location i are rows offsets[i]:offsets[i+1],
        ranked by distance). `component_mask` as in `snap`. Any location without a candidate ->
        Unsnappable naming every such `{field}[i]`.
        """
        lons = np.asarray(lons, dtype=np.float64).ravel()
        lats = np.asarray(lats, dtype=np.float64).ravel()
        n = len(lons)
        if lats.shape != lons.shape:
            raise ValueError("lons and lats must have the same length")
        bad = ~(np.isfinite(lons) & np.isfinite(lats) & (np.abs(lons) <= 180) & (np.abs(lats) <= 90))
        if bad.any():
            raise InvalidRequest(errors=[FieldError(field_path(field, i), "lon must be in [-180, 180] and lat in [-90, 90]")
                                         for i in np.flatnonzero(bad).tolist()])
        radius = np.full(n, np.nan) if search_radius is None else np.broadcast_to(
            np.asarray(search_radius, dtype=np.float64), (n,)).copy()
        strict = np.isfinite(radius)
        badr = strict & ~((radius > 0) & (radius <= 100))
        if badr.any():
            raise InvalidRequest(errors=[FieldError(field_path(field, i, "search_radius"), "must be between 1 and 100 metres")
                                         for i in np.flatnonzero(badr).tolist()])
        mask = np.asarray(allowed_edges_mask, dtype=bool)
        comp = None if component_mask is None else np.asarray(component_mask, dtype=bool)
        island: dict[str, list[np.ndarray]] = {}
        parts = []
        missed: list[np.ndarray] = []  # strict-radius points that found nothing in their one try
        todo = np.arange(n)
        for step, r in enumerate(DEFAULT_RADII):
            if not len(todo):
                break
            rad = np.where(strict[todo], radius[todo], r)
            if step > 0:  # strict points had their one try
                keep = ~strict[todo]
                missed.append(todo[~keep])
                todo, rad = todo[keep], rad[keep]
                if not len(todo):
                    break
            dlat = rad / _M_PER_DEG
            dlon = rad / (_M_PER_DEG * np.maximum(np.cos(np.radians(lats[todo])), 1e-6))
            mins = np.column_stack([lons[todo] - dlon, lats[todo] - dlat])
            maxs = np.column_stack([lons[todo] + dlon, lats[todo] + dlat])
            with self._lock:
                ids, counts = self.tree.intersection_v(mins, maxs)
            counts = counts.astype(np.int64)
            pt = np.repeat(todo, counts)
            found = self._project(pt, ids.astype(np.int64), lons, lats, np.repeat(rad, counts), mask)
            got = np.zeros(n, dtype=bool)
            if found is not None:
                if comp is not None:
                    inside = comp[found["edge"]]
                    has_inside = np.zeros(n, dtype=bool)
                    has_inside[found["point"][inside]] = True
                    # points with only island candidates: remember them as a fallback, keep growing
                    outside_only = ~has_inside[found["point"]]
                    for k, v in found.items():
                        island.setdefault(k, []).append(v[outside_only])
                    island.setdefault("step", []).append(np.full(int(outside_only.sum()), step))
                    found = {k: v[inside] for k, v in found.items()}
                got[found["point"]] = True
                parts.append({**found, "step": np.full(len(found["point"]), step)})
            todo = todo[~got[todo]]
        todo = np.concatenate([todo, *missed]) if missed else todo
        if comp is not None and len(todo) and island:
            # fallback: a point's island candidates from the first (smallest) radius that found any
            fb = {k: np.concatenate(v) for k, v in island.items()}
            first_step = np.full(n, len(DEFAULT_RADII), dtype=np.int64)
            np.minimum.at(first_step, fb["point"], fb["step"])
            sel = np.isin(fb["point"], todo) & (fb["step"] == first_step[fb["point"]])
            fb = {k: v[sel] for k, v in fb.items()}
            if len(fb["point"]):
                parts.append(fb)
                done = np.zeros(n, dtype=bool)
                done[fb["point"]] = True
                todo = todo[~done[todo]]
        if len(todo):
            raise Unsnappable(
                f"{len(todo)} location(s) have no road the costing may use within reach",
                errors=[FieldError(field_path(field, i), "no routable edge within "
                                   f"{(radius[i] if strict[i] else MAX_DEFAULT_RADIUS):g} m")
                        for i in np.sort(todo).tolist()],
            )
        cat = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else None
        order = np.lexsort((cat["edge"], np.round(cat["distance"], 3), cat["point"]))
        cat = {k: v[order] for k, v in cat.items()}
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(cat["point"], minlength=n), out=offsets[1:])
        return CandidateSet(offsets=offsets, edge=cat["edge"].astype(np.int64), fraction=cat["fraction"],
                            lon=cat["lon"], lat=cat["lat"], distance=cat["distance"], bearing=cat["bearing"])

    def _project(self, pt, ids, lons, lats, rad, mask) -> dict | None:
        """Vectorised projection of points `pt` onto pieces `ids` (pairs), nearest piece per (point,
        segment), both directions, filtered by radius and mask."""
        if not len(ids):
            return None
        lon0, lat0 = lons[pt], lats[pt]
        a = self.piece_a[ids]
        seg = self.piece_seg[ids]
        coslat = np.cos(np.radians(lat0))
        x0 = (self.lon[a] - lon0) * coslat * _M_PER_DEG
        y0 = (self.lat[a] - lat0) * _M_PER_DEG
        dx = (self.lon[a + 1] - self.lon[a]) * coslat * _M_PER_DEG
        dy = (self.lat[a + 1] - self.lat[a]) * _M_PER_DEG
        dd = dx * dx + dy * dy
        t = np.where(dd > 0, np.clip(-(x0 * dx + y0 * dy) / np.where(dd > 0, dd, 1.0), 0.0, 1.0), 0.0)
        dist = np.hypot(x0 + t * dx, y0 + t * dy)
        near = dist <= rad
        if not near.any():
            return None
        pt, ids, a, seg, t, dist = pt[near], ids[near], a[near], seg[near], t[near], dist[near]
        order = np.lexsort((dist, seg, pt))
        first = np.r_[True, (seg[order][1:] != seg[order][:-1]) | (pt[order][1:] != pt[order][:-1])]
        sel = order[first]
        pt, ids, a, seg, t, dist = pt[sel], ids[sel], a[sel], seg[sel], t[sel], dist[sel]
        frac = np.clip((self.piece_cum[ids] + t * self.piece_len[ids]) / self.seg_len[seg], 0.0, 1.0)
        slon = self.lon[a] + t * (self.lon[a + 1] - self.lon[a])
        slat = self.lat[a] + t * (self.lat[a + 1] - self.lat[a])
        b = bearing_deg(self.lat[a], self.lon[a], self.lat[a + 1], self.lon[a + 1])
        edge = np.concatenate([2 * seg, 2 * seg + 1])
        ok = mask[edge]
        if not ok.any():
            return None
        out = {
            "point": np.concatenate([pt, pt]),
            "edge": edge,
            "fraction": np.concatenate([frac, 1.0 - frac]),
            "lon": np.concatenate([slon, slon]),
            "lat": np.concatenate([slat, slat]),
            "distance": np.concatenate([dist, dist]),
            "bearing": np.concatenate([b, (b + 180.0) % 360.0]),
        }
        return {k: v[ok] for k, v in out.items()}

    def _candidates(self, lon0, lat0, mask, radius) -> dict | None:
        ids = self._query(lon0, lat0, radius)
        if not len(ids):
            return None
        a = self.piece_a[ids]
        seg = self.piece_seg[ids]
        coslat = np.cos(np.radians(lat0))
        x0 = (self.lon[a] - lon0) * coslat * _M_PER_DEG
        y0 = (self.lat[a] - lat0) * _M_PER_DEG
        x1 = (self.lon[a + 1] - lon0) * coslat * _M_PER_DEG
        y1 = (self.lat[a + 1] - lat0) * _M_PER_DEG
        dx, dy = x1 - x0, y1 - y0
        dd = dx * dx + dy * dy
        t = np.where(dd > 0, np.clip(-(x0 * dx + y0 * dy) / np.where(dd > 0, dd, 1.0), 0.0, 1.0), 0.0)
        px, py = x0 + t * dx, y0 + t * dy
        dist = np.hypot(px, py)
        near = dist <= radius
        if not near.any():
            return None
        ids, a, seg, t, dist, dx, dy = ids[near], a[near], seg[near], t[near], dist[near], dx[near], dy[near]
        cross = dx * (-y0[near]) - dy * (-x0[near])  # > 0: the point lies left of the piece's direction
        # nearest piece per segment
        order = np.lexsort((dist, seg))
        first = np.r_[True, seg[order][1:] != seg[order][:-1]]
        sel = order[first]
        ids, a, seg, t, dist, cross = ids[sel], a[sel], seg[sel], t[sel], dist[sel], cross[sel]
        frac = np.clip((self.piece_cum[ids] + t * self.piece_len[ids]) / self.seg_len[seg], 0.0, 1.0)
        slon = self.lon[a] + t * (self.lon[a + 1] - self.lon[a])
        slat = self.lat[a] + t * (self.lat[a + 1] - self.lat[a])
        b = bearing_deg(self.lat[a], self.lon[a], self.lat[a + 1], self.lon[a + 1])
        # two directed edges per segment
        edge = np.concatenate([2 * seg, 2 * seg + 1])
        ok = mask[edge]
        if not ok.any():
            return None
        out = {
            "edge": edge,
            "fraction": np.concatenate([frac, 1.0 - frac]),
            "lon": np.concatenate([slon, slon]),
            "lat": np.concatenate([slat, slat]),
            "distance": np.concatenate([dist, dist]),
            "bearing": np.concatenate([b, (b + 180.0) % 360.0]),
            "side": np.concatenate([cross, -cross]),
        }
        return {k: v[ok] for k, v in out.items()}

    def _street_match(self, edges: np.ndarray, street: str | None) -> np.ndarray | None:
        """bool per candidate: its edge's name or ref matches the street hint (None without a hint)."""
        if not street or not street.strip():
            return None
        from rapidfuzz import fuzz

        hint = street.strip().lower()
        g = self.graph
        strings = g.strings
        out = np.zeros(len(edges), dtype=bool)
        for i, e in enumerate(edges.tolist()):  # tens of candidates at most
            for idx in (int(g.seg_name[e >> 1]), int(g.seg_ref[e >> 1])):
                name = strings[idx].lower()
                if name and (hint == name or fuzz.partial_ratio(hint, name) >= 85):
                    out[i] = True
        return out

    @staticmethod
    def _result(found, keep, radius, heading, rank, relaxed, street=None) -> Candidates:
        f = {k: v[keep] for k, v in found.items()}
        if rank:
            hd = _angle_diff(f["bearing"], float(heading) % 360.0) if heading is not None else np.zeros(len(f["edge"]))
            miss = np.zeros(len(f["edge"])) if street is None else (~street[keep]).astype(np.float64)
            order = np.lexsort((f["edge"], hd, np.round(f["distance"], 3), miss))
        else:
            order = np.argsort(f["edge"], kind="stable")
        return Candidates(
            edge=f["edge"][order].astype(np.int64), fraction=f["fraction"][order], lon=f["lon"][order],
            lat=f["lat"][order], distance=f["distance"][order], bearing=f["bearing"][order], radius=radius,
            relaxed=relaxed,
        )
