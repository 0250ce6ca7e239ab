"""The router: locations -> candidates -> shortest paths (CH, or exact Dijkstra for non-default
options) -> legs with geometry, totals and maneuvers. One Router per bundle, shared by threads.

Library API (through `Engine`): `route(request)` returns the Valhalla-style trip document,
`matrix(...)` returns numpy arrays, `matrix_request(request)` the /matrix document.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from geoengine.costing import default_options, inactive_options, parse_costing_options
from geoengine.errors import FieldError, InvalidRequest, NoRoute
from geoengine.routing.profile import Profile, unpack

# Candidates farther than the nearest one by more than this (metres) are not offered to the search:
# enough for both directions of a road and every road meeting at a junction, not enough to let the
# search pick a neighbouring road (which would, e.g., bypass a turn restriction).
CANDIDATE_SLACK_M = 1.0
MAX_CANDIDATES = 8
PROFILE_CACHE = 8
KM_PER_MILE = 1.609344


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


class Router:
    def __init__(self, graph, snapper, ch_dir: Path | None):
        self.graph = graph
        self.snapper = snapper
        self.ch_dir = Path(ch_dir) if ch_dir else None
        self._lock = threading.Lock()
        self._defaults: dict[str, Profile] = {}
        self._custom: OrderedDict[tuple, Profile] = OrderedDict()
        self._grid = None

    # -- profiles ------------------------------------------------------------------------------------
    def _ch_for(self, costing: str):
        if self.ch_dir is None:
            return None
        d = self.ch_dir / costing
        if not (d / "ch.json").exists():
            return None
        from geoengine.routing.ch import ContractionHierarchy

        return ContractionHierarchy.load(d, mmap=True)

    def profile(self, costing: str, options=None, blocked: np.ndarray | None = None) -> Profile:
        options = options or default_options(costing)
        if options.is_default and blocked is None:
            prof = self._defaults.get(costing)
            if prof is None:
                with self._lock:
                    prof = self._defaults.get(costing)
                    if prof is None:
                        prof = Profile(self.graph, costing, options, ch=self._ch_for(costing))
                        self._defaults[costing] = prof
            return prof
        key = (costing, options.fingerprint, None if blocked is None else hash(np.packbits(blocked).tobytes()))
        with self._lock:
            prof = self._custom.get(key)
            if prof is not None:
                self._custom.move_to_end(key)
                return prof
        prof = Profile(self.graph, costing, options, blocked=blocked)
        with self._lock:
            self._custom[key] = prof
            while len(self._custom) > PROFILE_CACHE:
                self._custom.popitem(last=False)
        return prof

    def warm(self) -> None:
        """Open the snapper and the default car hierarchy and load the compiled kernels now."""
        prof = self.profile("auto")
        if prof.ch is not None:
            prof.ch.warmup()
        _ = self.snapper
        grid = self.grid  # build the grid and load its kernel now
        _ = prof.component
        if len(grid.lon):
            self.plain_candidates(prof, _Point(float(grid.lon[0]), float(grid.lat[0])), 0)

    def parse_options(self, costing: str, raw, field_name: str = "costing_options"):
        return parse_costing_options(costing, raw, field_name=field_name)

    # -- snapping -------------------------------------------------------------------------------------
    def candidates(self, prof: Profile, loc, index: int, field: str = "locations"):
        c = self.snapper.snap(
            float(loc.lon), float(loc.lat), prof.usable,
            search_radius=loc.search_radius, heading=loc.heading, heading_tolerance=loc.heading_tolerance,
            preferred_side=loc.preferred_side, rank_candidates=loc.rank_candidates, street=loc.street,
            index=index, field=field, component_mask=prof.component,
        )
        keep = c.distance <= float(np.min(c.distance)) + CANDIDATE_SLACK_M
        idx = np.flatnonzero(keep)[:MAX_CANDIDATES]
        return {"edge": c.edge[idx].astype(np.int64), "fraction": c.fraction[idx].astype(np.float64),
                "lon": c.lon[idx], "lat": c.lat[idx], "distance": c.distance[idx]}

    @property
    def grid(self):
        """The Numba grid snapper (fast path for locations without heading/side/street hints)."""
        if self._grid is None:
            from geoengine.routing.fastsnap import GridSnapper

            with self._lock:
                if self._grid is None:
                    self._grid = GridSnapper(self.snapper)
        return self._grid

    def plain_candidates(self, prof: Profile, loc, index: int, field: str = "locations"):
        """Candidates of a location without hints: the same as `candidates` (Snapper.snap_many's rules),
        from one Numba kernel call over a grid."""
        e, f, lo, la, d = self.grid.candidates(float(loc.lon), float(loc.lat),
                                               None if loc.search_radius is None else float(loc.search_radius),
                                               prof.usable, prof.component, index, field)
        keep = np.flatnonzero(d <= d[0] + CANDIDATE_SLACK_M)[:MAX_CANDIDATES]
        return {"edge": e[keep], "fraction": f[keep], "lon": lo[keep], "lat": la[keep], "distance": d[keep]}

    # -- point to point --------------------------------------------------------------------------------
    def shortest(self, prof: Profile, src: dict, dst: dict) -> Leg | None:
        """Cheapest path from any source candidate to any target candidate (exact)."""
        se, sf = src["edge"], src["fraction"]
        te, tf = dst["edge"], dst["fraction"]
        so, so2 = prof.source_offsets(se, sf)
        to, to2 = prof.target_offsets(te, tf)
        best = None
        # Same directed edge, target ahead of the source: the trivial path along that edge.
        same = se[:, None] == te[None, :]
        if same.any():
            ahead = same & (sf[:, None] <= tf[None, :])
            for i, j in zip(*np.nonzero(ahead), strict=True):
                e = int(se[i])
                frac = float(tf[j] - sf[i])
                # time and length from the packed offsets, exactly as the matrix table adds them up
                t, length = unpack(so2[i] + to2[j])
                leg = Leg(np.array([e]), float(sf[i]), float(tf[j]), frac * prof.cost[e], float(t), float(length),
                          int(i), int(j))
                if best is None or leg.cost < best.cost:
                    best = leg
        force_loop = bool(same.any())
        if prof.ch is not None:
            r = prof.ch.query(se, te, so, to, so2, to2, force_loop=force_loop)
        else:
            from geoengine.routing.dijkstra import bidirectional_dijkstra

            r = bidirectional_dijkstra(prof.search, se, te, so, to, so2, to2, force_loop=force_loop)
        if r.found and (best is None or r.primary < best.cost - 1e-9):
            t, length = unpack(r.secondary)
            best = Leg(np.asarray(r.path, dtype=np.int64), float(sf[r.source_index]), float(tf[r.target_index]),
                       float(r.primary), float(t), float(length), int(r.source_index), int(r.target_index))
        return best

    def route_legs(self, prof: Profile, locations, field: str = "locations"):
        """Snap every location and find each piece between consecutive locations.

        A `through` location continues on the edge it was reached by (no U-turn); `via` and `break`
        locations may be left in either direction. Raises Unsnappable (422) naming the location and
        NoRoute (422) naming the pair without a path."""
        cands = [self.plain_candidates(prof, loc, i, field) if _plain(loc) else self.candidates(prof, loc, i, field)
                 for i, loc in enumerate(locations)]
        pieces: list[Leg] = []
        prev: Leg | None = None
        for i in range(len(locations) - 1):
            src = cands[i]
            if prev is not None and locations[i].type in ("through", "break_through"):
                src = {"edge": prev.edges[-1:].copy(), "fraction": np.array([prev.f_last]),
                       "lon": src["lon"][:1], "lat": src["lat"][:1], "distance": src["distance"][:1]}
            leg = self.shortest(prof, src, cands[i + 1])
            if leg is None:
                raise NoRoute(
                    f"no route from {field}[{i}] to {field}[{i + 1}] for costing '{prof.costing}'",
                    errors=[FieldError(f"{field}[{i + 1}]", f"not reachable from {field}[{i}]")],
                )
            pieces.append(leg)
            prev = leg
        return cands, pieces

    # -- route document ------------------------------------------------------------------------------
    def route(self, req) -> dict:
        from geoengine.routing.trip import build_trip

        options = self.parse_options(req.costing, req.costing_options)
        blocked = self._avoid_mask(req)
        prof = self.profile(req.costing, options, blocked)
        cands, pieces = self.route_legs(prof, req.locations)
        notes = inactive_options(self.graph, options)
        return build_trip(self, prof, req, cands, pieces, notes)

    def _avoid_mask(self, req) -> np.ndarray | None:
        if not req.avoid_locations and not req.avoid_polygons:
            return None
        from geoengine.routing.avoid import avoid_mask

        return avoid_mask(self.graph, self.snapper, req.avoid_locations or [], req.avoid_polygons or [])

    # -- matrix ------------------------------------------------------------------------------------------
    def _snap_many(self, prof: Profile, lons, lats, radii, field: str):
        cs = self.snapper.snap_many(lons, lats, prof.usable, search_radius=radii, field=field,
                                    component_mask=prof.component)
        locs = []
        for i in range(len(cs)):
            a, b = int(cs.offsets[i]), int(cs.offsets[i + 1])
            d = cs.distance[a:b]
            keep = np.flatnonzero(d <= d.min() + CANDIDATE_SLACK_M)[:MAX_CANDIDATES] + a
            locs.append(keep)
        return cs, locs

    def matrix(self, sources, targets, costing: str = "auto", costing_options=None, *,
               source_radius=None, target_radius=None):
        """Travel time (s) and distance (m) between every source and target, as float64 arrays [N, M]
        with inf where there is no route; also the snapped (lon, lat) of sources and targets.

        `sources`, `targets`: arrays of shape (N, 2) as (lon, lat). Uses the CH bucket table for the
        costing's default options, one-to-all Dijkstra per source otherwise.
        """
        src = np.asarray(sources, dtype=np.float64).reshape(-1, 2)
        dst = np.asarray(targets, dtype=np.float64).reshape(-1, 2)
        options = self.parse_options(costing, costing_options)
        prof = self.profile(costing, options)
        cs, sl = self._snap_many(prof, src[:, 0], src[:, 1], source_radius, "sources")
        ct, tl = self._snap_many(prof, dst[:, 0], dst[:, 1], target_radius, "targets")

        def loc_tuple(cset, rows, target):
            e = cset.edge[rows].astype(np.int64)
            f = cset.fraction[rows].astype(np.float64)
            o, o2 = (prof.target_offsets if target else prof.source_offsets)(e, f)
            return (e, o, o2)

        s_locs = [loc_tuple(cs, r, False) for r in sl]
        t_locs = [loc_tuple(ct, r, True) for r in tl]
        if prof.ch is not None:
            primary, secondary = prof.ch.table(s_locs, t_locs)
        else:
            primary, secondary = self._table_dijkstra(prof, s_locs, t_locs)
        time_s, dist_m = unpack(secondary)
        time_s = np.where(np.isfinite(primary), time_s, np.inf)
        dist_m = np.where(np.isfinite(primary), dist_m, np.inf)
        # Pairs sharing an edge: the table's trivial meeting is wrong when the target lies behind the
        # source on that edge; answer those pairs exactly with the point-to-point search.
        for i, j in _behind_pairs(cs, sl, ct, tl):
            leg = self.shortest(prof, _cand(cs, sl[i]), _cand(ct, tl[j]))
            if leg is None:
                time_s[i, j] = dist_m[i, j] = np.inf
            else:
                time_s[i, j], dist_m[i, j] = leg.time_s, leg.length_m
        snapped_s = np.column_stack([cs.lon[[r[0] for r in sl]], cs.lat[[r[0] for r in sl]]])
        snapped_t = np.column_stack([ct.lon[[r[0] for r in tl]], ct.lat[[r[0] for r in tl]]])
        return MatrixResult(time_s, dist_m, snapped_s, snapped_t)

    def _table_dijkstra(self, prof: Profile, s_locs, t_locs):
        """Exact many-to-many on the option-weighted graph: one Numba kernel call (a Dijkstra per source
        that stops once every target candidate is settled)."""
        from geoengine.routing.dijkstra import table

        return table(prof.search, s_locs, t_locs)

    def matrix_request(self, req) -> dict:
        src = np.array([[l.lon, l.lat] for l in req.sources], dtype=np.float64)
        dst = np.array([[l.lon, l.lat] for l in req.targets], dtype=np.float64)
        sr = _radii(req.sources)
        tr = _radii(req.targets)
        res = self.matrix(src, dst, req.costing, req.costing_options, source_radius=sr, target_radius=tr)
        scale = 1000.0 if req.units == "kilometers" else 1000.0 * KM_PER_MILE
        waits = np.array([l.waiting_secs or 0 for l in req.targets], dtype=np.float64)
        rows = []
        for i in range(len(req.sources)):
            row = []
            for j in range(len(req.targets)):
                t = res.time_s[i, j]
                if not np.isfinite(t):
                    row.append(None)
                    continue
                row.append({"from_index": i, "to_index": j, "time": int(round(t + waits[j] * 0)),
                            "distance": round(float(res.distance_m[i, j]) / scale, 3)})
            rows.append(row)
        return {
            "sources_to_targets": rows,
            "sources": [{"lat": round(float(la), 6), "lon": round(float(lo), 6)} for lo, la in res.sources],
            "targets": [{"lat": round(float(la), 6), "lon": round(float(lo), 6)} for lo, la in res.targets],
            "units": req.units,
            **({"id": req.id} if req.id is not None else {}),
        }


    def route_many(self, origins, destinations, costing: str = "auto", costing_options=None):
        """Batch: (time_s, distance_m) of the route origins[i] -> destinations[i] for every i."""
        options = self.parse_options(costing, costing_options)
        prof = self.profile(costing, options)
        cs, sl = self._snap_many(prof, origins[:, 0], origins[:, 1], None, "origins")
        ct, tl = self._snap_many(prof, destinations[:, 0], destinations[:, 1], None, "destinations")
        n = len(origins)
        time_s = np.full(n, np.inf)
        dist_m = np.full(n, np.inf)
        for i in range(n):
            leg = self.shortest(prof, _cand(cs, sl[i]), _cand(ct, tl[i]))
            if leg is not None:
                time_s[i], dist_m[i] = leg.time_s, leg.length_m
        return time_s, dist_m

def _behind_pairs(cs, sl, ct, tl) -> set[tuple[int, int]]:
    """(source, target) pairs with a shared candidate edge on which the target lies behind the source."""
    s_rows = np.concatenate(sl)
    t_rows = np.concatenate(tl)
    s_own = np.repeat(np.arange(len(sl)), [len(r) for r in sl])
    t_own = np.repeat(np.arange(len(tl)), [len(r) for r in tl])
    s_edge, t_edge = cs.edge[s_rows], ct.edge[t_rows]
    pairs: set[tuple[int, int]] = set()
    for e in np.intersect1d(s_edge, t_edge).tolist():
        si = np.flatnonzero(s_edge == e)
        ti = np.flatnonzero(t_edge == e)
        behind = cs.fraction[s_rows[si]][:, None] > ct.fraction[t_rows[ti]][None, :]
        for a, b in zip(*np.nonzero(behind), strict=True):
            pairs.add((int(s_own[si[a]]), int(t_own[ti[b]])))
    return pairs


@dataclass
class _Point:
    lon: float
    lat: float
    search_radius: float | None = None


def _plain(loc) -> bool:
    return (loc.heading is None and loc.preferred_side in (None, "either") and not loc.street
            and loc.rank_candidates is not False)


def _radii(locs):
    r = np.array([np.nan if l.search_radius is None else l.search_radius for l in locs], dtype=np.float64)
    return None if np.isnan(r).all() else r


def _cand(cset, rows) -> dict:
    return {"edge": cset.edge[rows].astype(np.int64), "fraction": cset.fraction[rows].astype(np.float64),
            "lon": cset.lon[rows], "lat": cset.lat[rows], "distance": cset.distance[rows]}


@dataclass
class MatrixResult:
    """time_s, distance_m: float64[N, M] (inf = no route); sources, targets: snapped (lon, lat) [N|M, 2]."""

    time_s: np.ndarray
    distance_m: np.ndarray
    sources: np.ndarray
    targets: np.ndarray


def bad_request(field: str, message: str) -> InvalidRequest:
    return InvalidRequest(errors=[FieldError(field, message)])

