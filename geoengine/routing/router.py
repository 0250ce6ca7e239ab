"""The router: the search layer every routing service shares. Locations -> candidates (snapping) ->
shortest pieces (CH, or exact Dijkstra for non-default options) and many-to-many arrays. It returns
`Leg` pieces and numpy arrays, never documents: the services (route, matrix, optimised_route,
isochrone, matching, directions) build their results from them. One Router per bundle, shared by
threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from geoengine.arrays import unique
from geoengine.costing import MOTOR_COSTINGS, default_options, inactive_options, parse_costing_options
from geoengine.errors import FieldError, InvalidRequest, NoRoute, Unsnappable, field_path
from geoengine.graph import tags as T
from geoengine.routing.ch import Locations
from geoengine.routing.dijkstra import table as dijkstra_table
from geoengine.routing.pieces import Leg, PieceSummary
from geoengine.routing.profile import Profile, TurnStructure, unpack, unpack_scalar
from geoengine.routing.snap import MAX_DEFAULT_RADIUS

# Candidates farther than the nearest one by more than this (metres) are not offered to the search:
# enough for both directions of a road and every road meeting at a junction, not enough to let the
# search pick a neighbouring road (which would, e.g., bypass a turn restriction).
CANDIDATE_SLACK_M = 1.0
MAX_CANDIDATES = 8
#: bool[256] by road class: the classes that make a route's `has_highway`
IS_HIGHWAY = np.isin(np.arange(256), [T.CLASS["motorway"], T.CLASS["trunk"]])
PROFILE_CACHE = 8


class _Speeds:
    """The measured speeds a router answers with (`overlay`, None for the profile speeds), their store's
    stamp and the default profiles made with them: replaced as one object, so a request that read it
    once uses one set of speeds throughout."""

    def __init__(self, overlay=None, stamp=None):
        self.overlay = overlay
        self.stamp = stamp
        self.generation = 0 if overlay is None else overlay.generation
        self.defaults: dict[str, Profile] = {}


class Router:
    def __init__(self, graph, snapper, ch_dir: Path | None, *, cch_cache_bytes: int | None = None,
                 speed_store=None, time_of_day=None, speeds_spare: str = "auto"):
        self.graph = graph
        self.snapper = snapper
        self.ch_dir = Path(ch_dir) if ch_dir else None
        self.cch_cache_bytes = cch_cache_bytes
        self._customiser = None
        self._cch_lock = threading.Lock()
        self._lock = threading.Lock()
        self._custom: OrderedDict[tuple, Profile] = OrderedDict()
        #: (costing, options fingerprint) -> `TurnStructure` of a default-options profile made with
        #: earlier speeds: new speeds keep every arc, so their profiles take it over (Profile.turn_csr)
        self._structures: dict[tuple[str, str], TurnStructure] = {}
        self._grid = None
        self._features: dict | None = None
        #: `geoengine.traffic.SpeedStore` of the bundle (measured speeds beside it), or None
        self.speed_store = speed_store
        #: keep a spare set of customisation arrays (cch.CCHTopology.keep_spare): "on", "off", or "auto"
        #: (once the bundle has measured speeds: an operator who applied speeds will apply more)
        self.speeds_spare = speeds_spare
        self._speeds_lock = threading.Lock()
        self._speeds = _Speeds()
        self.sync_speeds()
        #: `geoengine.traffic.timeofday.TimeOfDay` (time-of-day profiles beside the bundle), or None
        self.time_of_day = time_of_day

    # -- measured speeds (docs/traffic.md) -------------------------------------------------------------
    @property
    def speeds(self):
        """The `SpeedOverlay` the router answers with (None: the costings' profile speeds)."""
        return self._speeds.overlay

    def sync_speeds(self) -> bool:
        """Switch to the store's current speeds if another process (or this one) changed them: one stat
        per call when nothing changed. Profiles made with the old speeds are dropped; a request that
        already holds one finishes with it. True when the speeds changed."""
        store = self.speed_store
        if store is None:
            return False
        stamp = store.stamp()
        if stamp == self._speeds.stamp:
            return False
        with self._speeds_lock:
            stamp = store.stamp()
            if stamp == self._speeds.stamp:
                return False
            new = _Speeds(store.load(self.graph), stamp)
            with self._lock:
                for costing, prof in self._speeds.defaults.items():
                    if prof.structure is not None:
                        self._structures[(costing, prof.options.fingerprint)] = prof.structure
                self._custom.clear()
            if self._customiser is not None:
                self._customiser.cache.clear()
            self._speeds = new
        self._set_keep_spare()
        return True

    def _set_keep_spare(self) -> None:
        cust = self._customiser
        if cust is not None:
            mode = self.speeds_spare
            cust.topology.keep_spare = mode == "on" or (mode == "auto" and self._speeds.stamp is not None)

    # -- profiles ------------------------------------------------------------------------------------
    def _ch_for(self, costing: str):
        if self.ch_dir is None:
            return None
        d = self.ch_dir / costing
        if not (d / "ch.json").exists():
            return None
        from geoengine.routing.ch import ContractionHierarchy

        return ContractionHierarchy.load(d, mmap=True)

    @property
    def customiser(self):
        """The bundle's CCH (`geoengine.routing.customise.Customiser`), or None for a bundle without one."""
        if self._customiser is None and self.ch_dir is not None and (self.ch_dir / "cch" / "cch.json").exists():
            with self._cch_lock:
                if self._customiser is None:
                    from geoengine.routing.customise import DEFAULT_CACHE_BYTES, Customiser

                    limit = DEFAULT_CACHE_BYTES if self.cch_cache_bytes is None else self.cch_cache_bytes
                    self._customiser = Customiser.open(self.graph, self.ch_dir / "cch", limit)
                    self._set_keep_spare()
        return self._customiser

    def profile(self, costing: str, options=None, blocked: np.ndarray | None = None, bucket=None) -> Profile:
        """The profile of a costing, options and blocked edges, with a hierarchy: the bundle's classic
        CH for a costing's defaults when the bundle has one, else the CCH customised for exactly these
        weights (defaults: kept for the router's life; other option sets and avoid areas: in the
        byte-bounded LRU `customiser.cache`). Without either, `ch` is None (exact Dijkstra). `bucket`: a
        date_time's `geoengine.traffic.timeofday.Selection`, whose quarter hour's profile speeds the
        metric uses (docs/traffic.md; customised and kept in the same LRU)."""
        options = options or default_options(costing)
        self.sync_speeds()
        sp = self._speeds
        tod = None
        if bucket is not None and self.time_of_day is not None:
            tod = self.time_of_day.metric(self.graph, costing, bucket, sp.overlay)
        if tod is None and blocked is None and (not options.given or options.is_default):
            return self._default_profile(costing, sp=sp)
        speeds = sp.overlay if costing in MOTOR_COSTINGS else None
        if tod is not None:
            speeds = tod[0]
        key = (costing, options.fingerprint, None if blocked is None else hash(np.packbits(blocked).tobytes()),
               sp.generation if speeds is not None else 0, None if tod is None else tod[1])
        structure = self._structure(costing, options) if blocked is None else None
        cust = self.customiser
        if cust is not None:
            def make():
                p = Profile(self.graph, costing, options, blocked=blocked, speeds=speeds, structure=structure)
                p.ch = cust.customise_soon(p, on_perfect=lambda: cust.cache.refresh(key))
                _ = p.component  # computed now, so its bytes are counted
                return p

            return cust.cache.get(key, make)
        with self._lock:
            prof = self._custom.get(key)
            if prof is not None:
                self._custom.move_to_end(key)
                return prof
        prof = Profile(self.graph, costing, options, blocked=blocked, speeds=speeds, structure=structure)
        with self._lock:
            self._custom[key] = prof
            while len(self._custom) > PROFILE_CACHE:
                self._custom.popitem(last=False)
        return prof

    def _default_profile(self, costing: str, soon: bool = True, sp: _Speeds | None = None) -> Profile:
        """A costing's default profile, made once per set of speeds. `soon`: a request waits for the
        basic customisation only (the perfect one follows in the background); else the perfect one is
        made at once, which needs about 0.7 GB less at its peak at 64 copies of Liechtenstein (start-up:
        nobody waits). With measured speeds a motor costing is customised on the CCH (the bundle's
        classic CH holds the profile speeds)."""
        sp = sp or self._speeds
        prof = sp.defaults.get(costing)
        if prof is None:
            with self._lock:
                prof = sp.defaults.get(costing)
                if prof is None:
                    speeds = sp.overlay if costing in MOTOR_COSTINGS else None
                    ch = self._ch_for(costing) if speeds is None else None
                    prof = Profile(self.graph, costing, default_options(costing), ch=ch, speeds=speeds,
                                   structure=self._structures.get((costing, default_options(costing).fingerprint)))
                    if prof.ch is None and self.customiser is not None:
                        cust = self.customiser
                        prof.ch = cust.customise_soon(prof) if soon else cust.customise(prof)
                    sp.defaults[costing] = prof
        return prof

    def _structure(self, costing: str, options) -> TurnStructure | None:
        """The `TurnStructure` a new profile of `costing` with `options` (no blocked edges) may take
        over: the current default profile's when the options are the defaults, else one kept from
        earlier speeds."""
        if options.is_default:
            prof = self._speeds.defaults.get(costing)
            if prof is not None and prof.structure is not None:
                return prof.structure
        return self._structures.get((costing, options.fingerprint))

    def warm(self) -> None:
        """Open the snapper and the default car hierarchy and load the compiled kernels now."""
        if self.customiser is not None:
            self.customiser.warmup()
        prof = self._default_profile("auto", soon=False)
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
        force_loop = bool(same.any())
        if force_loop:
            ahead = same & (sf[:, None] <= tf[None, :])
            for i, j in zip(*np.nonzero(ahead), strict=True):
                e = int(se[i])
                # time and length from the packed offsets, exactly as the matrix table adds them up
                t, length = unpack(so2[i] + to2[j])
                leg = Leg(np.array([e]), float(sf[i]), float(tf[j]), float(so[i] + to[j]), float(t), float(length),
                          int(i), int(j))
                if best is None or leg.cost < best.cost:
                    best = leg
        if prof.ch is not None:
            r = prof.ch.query(se, te, so, to, so2, to2, force_loop=force_loop)
        else:
            from geoengine.routing.dijkstra import bidirectional_dijkstra

            r = bidirectional_dijkstra(prof.search, se, te, so, to, so2, to2, force_loop=force_loop)
        if r.found and (best is None or r.primary < best.cost - 1e-9):
            t, length = unpack_scalar(float(r.secondary))
            best = Leg(np.asarray(r.path, dtype=np.int64), float(sf[r.source_index]), float(tf[r.target_index]),
                       float(r.primary), float(t), float(length), int(r.source_index), int(r.target_index))
        return best

    def route_legs(self, prof: Profile, locations, field: str = "locations", polyline: int = 0):
        """Snap every location and find each piece between consecutive locations.

        A `through` location continues on the edge it was reached by (no U-turn); `via` and `break`
        locations may be left in either direction. Raises Unsnappable (422) naming the location and
        NoRoute (422) naming the pair without a path. Two plain locations take one kernel call
        (`plain_route`), whose piece also carries its shape (and its polyline at `polyline` digits)."""
        if len(locations) == 2:
            got = self.plain_route(prof, locations, polyline)
            if got is not None:
                return got
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
                    errors=[FieldError(field_path(field, i + 1), f"not reachable from {field}[{i}]")],
                )
            pieces.append(leg)
            prev = leg
        return cands, pieces

    def plain_route(self, prof: Profile, locations, polyline: int = 0):
        """`route_legs` of two locations without hints, from one kernel call (routing/plainroute.py):
        the same candidates and piece, bit for bit, the piece with its shape and summary; None when the
        general path must answer (a hint, a hierarchy without its elimination tree, nothing in reach,
        both locations on one edge, no path)."""
        a, b = locations
        if not (_plain(a) and _plain(b)):
            return None
        plain = prof.plain
        if plain is None or plain.ch is not prof.ch:
            from geoengine.routing.plainroute import PlainRoute

            if not PlainRoute.usable_with(prof):
                return None
            plain = prof.plain = PlainRoute(self.graph, self.grid, prof, IS_HIGHWAY)
        ra, rb = a.search_radius, b.search_radius
        out = plain(np.array((float(a.lon), float(b.lon))), np.array((float(a.lat), float(b.lat))),
                    np.array((np.nan if ra is None else float(ra), np.nan if rb is None else float(rb))),
                    CANDIDATE_SLACK_M, MAX_CANDIDATES, 10.0 ** polyline if polyline else 0.0)
        (status, E, F, LO, LA, D, ptr, best, best2, path, si, ti, lon, lat, begin, end, covered, seconds, flags,
         highway, box, climb, descent, poly) = out
        if status != 1:
            return None
        p0, p1, p2 = ptr.tolist()
        cands = [{"edge": E[p0:p1], "fraction": F[p0:p1], "lon": LO[p0:p1], "lat": LA[p0:p1], "distance": D[p0:p1]},
                 {"edge": E[p1:p2], "fraction": F[p1:p2], "lon": LO[p1:p2], "lat": LA[p1:p2], "distance": D[p1:p2]}]
        t, length = unpack_scalar(float(best2))
        si, ti = int(si), int(ti)
        leg = Leg(path, float(F[p0 + si]), float(F[p1 + ti]), float(best), float(t), float(length), si, ti,
                  shape=(lon, lat, begin, end, covered),
                  summary=PieceSummary(int(flags), bool(highway), box.tolist(), *((climb, descent) if plain.grades
                                                                                   else (None, None)),
                                       seconds, (polyline, poly.tobytes().decode("ascii")) if polyline else None))
        return cands, [leg]

    # -- one search for a route request -----------------------------------------------------------------
    def search(self, costing: str, costing_options, locations, *, avoid_locations=None, avoid_polygons=None,
               field: str = "locations", polyline: int = 0, bucket=None) -> Searched:
        """Costing options and avoid areas applied, every location snapped, each piece found: the one
        place a route's search is made (route, directions, optimised route). `polyline`: 5 or 6 to have
        a plain route's piece carry its shape encoded at that precision."""
        options = self.parse_options(costing, costing_options)
        blocked = self._avoid_mask(avoid_locations, avoid_polygons)
        prof = self.profile(costing, options, blocked, bucket=bucket)
        cands, pieces = self.route_legs(prof, locations, field, polyline)
        notes = self.notes(options)
        return Searched(prof, cands, pieces, notes)

    def notes(self, options) -> list[str]:
        """Warnings for options that cannot act on this bundle (said, never silently ignored)."""
        return inactive_options(self.graph, options) + self._absent_feature_notes(options)

    def _absent_feature_notes(self, options) -> list[str]:
        """Notes for options that concern road features this bundle does not have (the option is
        accepted and applied, but cannot change a route here): said, not silently ignored."""
        if not options.given:
            return []
        if self._features is None:
            cls = unique(np.asarray(self.graph.seg_class))
            flags = np.bitwise_or.reduce(np.asarray(self.graph.seg_flags)) if self.graph.n_segments else 0
            self._features = {
                "use_highways": bool(IS_HIGHWAY[cls].any()),
                "use_tolls": bool(flags & (T.F_TOLL | T.F_TOLL_HGV)),
                "use_ferry": bool(flags & T.F_FERRY),
            }
        what = {"use_highways": "motorways or trunk roads", "use_tolls": "toll roads", "use_ferry": "ferries"}
        return [f"{name} has no effect: this bundle's graph has no {what[name]}"
                for name, present in self._features.items() if name in options.given and not present]

    def _avoid_mask(self, avoid_locations, avoid_polygons) -> np.ndarray | None:
        if not avoid_locations and not avoid_polygons:
            return None
        from geoengine.routing.avoid import avoid_mask

        return avoid_mask(self.graph, self.snapper, avoid_locations or [], avoid_polygons or [])

    # -- matrix ------------------------------------------------------------------------------------------
    def _snap_many(self, prof: Profile, lons, lats, radii, field: str, memo: dict | None = None, locs=None):
        """Candidates of many locations (matrix, batch): `(cset, rows)` where cset has flat arrays
        edge/fraction/lon/lat/distance and rows[i] indexes location i's candidates (nearest first, within
        CANDIDATE_SLACK_M of the nearest). One grid-kernel call per distinct plain location; a location
        of `locs` with hints (heading, preferred side, street, rank_candidates false) is snapped with
        them, as a route's is. Every location that cannot be snapped is named in one Unsnappable."""
        grid = self.grid
        lons = np.asarray(lons, dtype=np.float64).ravel()
        lats = np.asarray(lats, dtype=np.float64).ravel()
        n = len(lons)
        bad = ~(np.isfinite(lons) & np.isfinite(lats) & (np.abs(lons) <= 180) & (np.abs(lats) <= 90))
        if bad.any():
            raise InvalidRequest(errors=[FieldError(field_path(field, i), "lon must be in [-180, 180] and lat in [-90, 90]")
                                         for i in np.flatnonzero(bad).tolist()])
        rad = np.full(n, np.nan) if radii is None else np.broadcast_to(np.asarray(radii, dtype=np.float64), (n,))
        badr = np.isfinite(rad) & ~((rad > 0) & (rad <= 100))
        if badr.any():
            raise InvalidRequest(errors=[FieldError(field_path(field, i, "search_radius"), "must be between 1 and 100 metres")
                                         for i in np.flatnonzero(badr).tolist()])
        memo = {} if memo is None else memo  # candidates shared by sources and targets
        if locs is None or all(_plain(loc) for loc in locs):
            return self._snap_plain(prof, lons, lats, rad, field, memo)
        parts, rows, errors = [], [], []
        start = 0
        for i in range(n):
            if locs is not None and not _plain(locs[i]):
                try:
                    c = self.candidates(prof, locs[i], i, field)
                except Unsnappable as exc:
                    errors.extend(exc.errors)
                    rows.append(np.empty(0, np.int64))
                    continue
                got = (c["edge"], c["fraction"], c["lon"], c["lat"], c["distance"])
                parts.append(got)
                rows.append(np.arange(start, start + len(got[0])))
                start += len(got[0])
                continue
            key = (float(lons[i]), float(lats[i]), None if np.isnan(rad[i]) else float(rad[i]))  # NaN != NaN
            got = memo.get(key)
            if got is None:
                try:
                    e, f, lo, la, d = grid.candidates(lons[i], lats[i], None if np.isnan(rad[i]) else rad[i],
                                                      prof.usable, prof.component, i, field)
                except Unsnappable as exc:
                    errors.extend(exc.errors)
                    rows.append(np.empty(0, np.int64))
                    continue
                k = min(int(np.searchsorted(d, d[0] + CANDIDATE_SLACK_M, side="right")), MAX_CANDIDATES)
                got = memo[key] = (e[:k], f[:k], lo[:k], la[:k], d[:k])
            k = len(got[0])
            parts.append(got)
            rows.append(np.arange(start, start + k))
            start += k
        if errors:
            raise Unsnappable(f"{len(errors)} location(s) have no road the costing may use within reach",
                              errors=errors)
        cat = [np.concatenate([p[c] for p in parts]) for c in range(5)]
        return _CandArrays(*cat), rows

    def pair_candidates(self, prof: Profile, origins, destinations) -> list[tuple[dict, dict]]:
        """The candidates of each pair origins[i] -> destinations[i] ((n, 2) arrays of lon, lat), as
        `shortest` takes them: one (source, target) pair of candidate dicts per pair. Every location that
        cannot be snapped is named in one Unsnappable (fields "origins" and "destinations")."""
        memo: dict = {}
        cs, sl = self._snap_many(prof, origins[:, 0], origins[:, 1], None, "origins", memo)
        ct, tl = self._snap_many(prof, destinations[:, 0], destinations[:, 1], None, "destinations", memo)
        return [(_cand(cs, a), _cand(ct, b)) for a, b in zip(sl, tl, strict=True)]

    def _snap_plain(self, prof: Profile, lons, lats, rad, field: str, memo: dict):
        """`_snap_many` of plain locations: one grid-kernel call for the distinct points (a second call
        with the very same points, the targets of a symmetric matrix, reuses the first's answer)."""
        n = len(lons)
        if n == 0:
            empty = np.empty(0)
            return _CandArrays(np.empty(0, np.int64), empty, empty, empty, empty), []
        key = (lons.tobytes(), lats.tobytes(), rad.tobytes(), id(prof))
        hit = memo.get("plain")
        if hit is not None and hit[0] == key:
            E, F, LO, LA, D, ptr, ok = hit[1]
        else:
            pts = np.column_stack([lons, lats, np.where(np.isnan(rad), -1.0, rad)])
            uniq, inv = np.unique(pts, axis=0, return_inverse=True)
            inv = inv.ravel()
            Eu, Fu, LOu, LAu, Du, ptr_u, ok_u = self.grid.candidates_many(
                uniq[:, 0], uniq[:, 1], np.where(uniq[:, 2] < 0, np.nan, uniq[:, 2]), prof.usable, prof.component,
                CANDIDATE_SLACK_M, MAX_CANDIDATES)
            counts = (ptr_u[1:] - ptr_u[:-1])[inv]
            ptr = np.zeros(n + 1, np.int64)
            np.cumsum(counts, out=ptr[1:])
            # flat index of every point's candidates in the distinct points' arrays
            idx = np.repeat(ptr_u[:-1][inv] - ptr[:-1], counts) + np.arange(ptr[-1])
            E, F, LO, LA, D = Eu[idx], Fu[idx], LOu[idx], LAu[idx], Du[idx]
            ok = ok_u[inv]
            memo["plain"] = (key, (E, F, LO, LA, D, ptr, ok))
        if not ok.all():
            errors = []
            for i in np.flatnonzero(~ok).tolist():
                where = field_path(field, i)
                reach = rad[i] if np.isfinite(rad[i]) else MAX_DEFAULT_RADIUS
                errors.append(FieldError(where, f"no routable edge within {reach:g} m"))
            raise Unsnappable(f"{len(errors)} location(s) have no road the costing may use within reach",
                              errors=errors)
        rows = np.split(np.arange(ptr[-1]), ptr[1:-1])
        return _CandArrays(E, F, LO, LA, D), rows

    def matrix(self, sources, targets, costing: str = "auto", costing_options=None, *,
               source_radius=None, target_radius=None, field: str | None = None, source_locations=None,
               target_locations=None, bucket=None):
        """Travel time (s) and distance (m) between every source and target, as float64 arrays [N, M]
        with inf where there is no route; also the snapped (lon, lat) of sources and targets.

        `sources`, `targets`: arrays of shape (N, 2) as (lon, lat). Uses the CH bucket table for the
        costing's default options, one-to-all Dijkstra per source otherwise. `field`: the request field
        both point lists come from, for error paths (default: "sources" and "targets").
        `source_locations`/`target_locations`: the request's location objects, whose snapping hints
        (heading, preferred_side, street, rank_candidates) are honoured as a route honours them.
        """
        src = np.asarray(sources, dtype=np.float64).reshape(-1, 2)
        dst = np.asarray(targets, dtype=np.float64).reshape(-1, 2)
        options = self.parse_options(costing, costing_options)
        prof = self.profile(costing, options, bucket=bucket)  # bucket: a date_time's metric (docs/traffic.md)
        memo: dict = {}
        cs, sl = self._snap_many(prof, src[:, 0], src[:, 1], source_radius, field or "sources", memo,
                                 source_locations)
        ct, tl = self._snap_many(prof, dst[:, 0], dst[:, 1], target_radius, field or "targets", memo,
                                 target_locations)

        sv, so, so2, sp = _flat(prof, cs, sl, target=False)
        tv, to, to2, tp = _flat(prof, ct, tl, target=True)
        primary, secondary = _table_flat(prof, sv, so, so2, sp, tv, to, to2, tp)
        time_s, dist_m = unpack(secondary)
        time_s = np.where(np.isfinite(primary), time_s, np.inf)
        dist_m = np.where(np.isfinite(primary), dist_m, np.inf)
        # Pairs sharing an edge: the table's trivial meeting is wrong when the target lies behind the
        # source on that edge; answer those pairs exactly (paths of at least one turn-graph arc).
        behind = sorted(_behind_pairs(cs, sl, ct, tl))
        if behind:
            t_b, d_b = self._behind_answers(prof, cs, sl, ct, tl, behind)
            ii = np.array([p[0] for p in behind])
            jj = np.array([p[1] for p in behind])
            time_s[ii, jj] = t_b
            dist_m[ii, jj] = d_b
        first_s = [r[0] for r in sl]
        first_t = [r[0] for r in tl]
        snapped_s = np.column_stack([cs.lon[first_s], cs.lat[first_s]])
        snapped_t = np.column_stack([ct.lon[first_t], ct.lat[first_t]])
        return MatrixResult(time_s, dist_m, snapped_s, snapped_t, edges=(cs.edge[first_s], ct.edge[first_t]))

    def _behind_answers(self, prof: Profile, cs, sl, ct, tl, pairs):
        """(time_s, distance_m) of pairs whose target lies behind the source on a shared edge. With a
        hierarchy: the shared source candidates are replaced by their turn-graph successors (so every
        path has at least one arc), all pairs in one batch kernel call, and the same-edge-ahead option
        of other shared candidates compared; without: the exact point-to-point search per pair."""
        n = len(pairs)
        if prof.ch is None:
            out_t, out_d = np.full(n, np.inf), np.full(n, np.inf)
            for k, (i, j) in enumerate(pairs):
                leg = self.shortest(prof, _cand(cs, sl[i]), _cand(ct, tl[j]))
                if leg is not None:
                    out_t[k], out_d[k] = leg.time_s, leg.length_m
            return out_t, out_d
        off, tgt, w, packed = prof.turn_csr()
        vs, os_, o2s, sp = [], [], [], [0]
        ahead_c = np.full(n, np.inf)
        ahead_s = np.zeros(n)
        tv, to, to2, tp = [], [], [], [0]
        for k, (i, j) in enumerate(pairs):
            n_before = len(vs)
            se, sf = cs.edge[sl[i]], cs.fraction[sl[i]]
            te, tf = ct.edge[tl[j]], ct.fraction[tl[j]]
            so, so2 = prof.source_offsets(se, sf)
            to_, to2_ = prof.target_offsets(te, tf)
            for a in range(len(se)):
                v = int(se[a])
                hit = np.flatnonzero(te == v)
                if not len(hit):
                    vs.append([v]), os_.append([so[a]]), o2s.append([so2[a]])
                    continue
                x, y = off[v], off[v + 1]
                vs.append(tgt[x:y]), os_.append(so[a] + w[x:y]), o2s.append(so2[a] + packed[x:y])
                for b in hit.tolist():
                    if sf[a] <= tf[b]:
                        c = so[a] + to_[b]
                        if c < ahead_c[k]:
                            ahead_c[k], ahead_s[k] = c, so2[a] + to2_[b]
            sp.append(sp[-1] + sum(len(x) for x in vs[n_before:]))
            tv.append(te), to.append(to_), to2.append(to2_)
            tp.append(tp[-1] + len(te))
        P, S = _pairs_flat(prof, np.concatenate(vs).astype(np.int64), np.concatenate(os_).astype(np.float64),
                           np.concatenate(o2s).astype(np.float64), np.asarray(sp, np.int64),
                           np.concatenate(tv).astype(np.int64), np.concatenate(to), np.concatenate(to2),
                           np.asarray(tp, np.int64))
        use_ahead = ahead_c < P
        S = np.where(use_ahead, ahead_s, S)
        t, d = unpack(S)
        found = np.isfinite(np.minimum(P, ahead_c))
        return np.where(found, t, np.inf), np.where(found, d, np.inf)

    def route_many(self, origins, destinations, costing: str = "auto", costing_options=None):
        """Batch: (time_s, distance_m) of the route origins[i] -> destinations[i] for every i. With a
        hierarchy all pairs go to one batch kernel call (pairs whose destination lies behind the
        origin on a shared edge are answered as in `matrix`); otherwise one exact search per pair."""
        options = self.parse_options(costing, costing_options)
        prof = self.profile(costing, options)
        memo: dict = {}
        cs, sl = self._snap_many(prof, origins[:, 0], origins[:, 1], None, "origins", memo)
        ct, tl = self._snap_many(prof, destinations[:, 0], destinations[:, 1], None, "destinations", memo)
        n = len(origins)
        if prof.ch is None:
            time_s = np.full(n, np.inf)
            dist_m = np.full(n, np.inf)
            for i in range(n):
                leg = self.shortest(prof, _cand(cs, sl[i]), _cand(ct, tl[i]))
                if leg is not None:
                    time_s[i], dist_m[i] = leg.time_s, leg.length_m
            return time_s, dist_m
        sv, so, so2, sp = _flat(prof, cs, sl, target=False)
        tv, to, to2, tp = _flat(prof, ct, tl, target=True)
        P, S = _pairs_flat(prof, sv, so, so2, sp, tv, to, to2, tp)
        t, d = unpack(S)
        time_s = np.where(np.isfinite(P), t, np.inf)
        dist_m = np.where(np.isfinite(P), d, np.inf)
        behind = sorted(_behind_pairs(cs, sl, ct, tl, same_index=True))
        if behind:
            t_b, d_b = self._behind_answers(prof, cs, sl, ct, tl, behind)
            ii = np.array([p[0] for p in behind])
            time_s[ii], dist_m[ii] = t_b, d_b
        return time_s, dist_m


def _flat(prof: Profile, cset, rows, target: bool) -> Locations:
    """`Locations` (vertices, offsets, packed offsets, ptr) of candidate rows, vectorised."""
    idx = np.concatenate(rows) if rows else np.empty(0, np.int64)
    ptr = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(r) for r in rows], out=ptr[1:])
    v = cset.edge[idx].astype(np.int64)
    o, o2 = (prof.target_offsets if target else prof.source_offsets)(v, cset.fraction[idx])
    return Locations(v, np.ascontiguousarray(o, np.float64), np.ascontiguousarray(o2, np.float64), ptr)


def _table_flat(prof: Profile, sv, so, so2, sp, tv, to, to2, tp):
    """Many-to-many over flat location arrays: the hierarchy's bucket table, or the exact Dijkstra table."""
    src, dst = Locations(sv, so, so2, sp), Locations(tv, to, to2, tp)
    if prof.ch is not None:
        return prof.ch.table(src, dst)
    return dijkstra_table(prof.search, src, dst)


def _pairs_flat(prof: Profile, sv, so, so2, sp, tv, to, to2, tp):
    """Batch point-to-point (pair k: source location k -> target location k) in one hierarchy call."""
    return prof.ch.pairs(Locations(sv, so, so2, sp), Locations(tv, to, to2, tp))


def _behind_pairs(cs, sl, ct, tl, same_index: bool = False) -> set[tuple[int, int]]:
    """(source, target) pairs with a shared candidate edge on which the target lies behind the source
    (vectorised: sort target candidates by edge, find each source candidate's run of equal edges).
    `same_index`: only pairs (i, i) (batch point-to-point)."""
    s_rows = np.concatenate(sl)
    t_rows = np.concatenate(tl)
    s_own = np.repeat(np.arange(len(sl)), [len(r) for r in sl])
    t_own = np.repeat(np.arange(len(tl)), [len(r) for r in tl])
    s_edge, t_edge = cs.edge[s_rows].astype(np.int64), ct.edge[t_rows].astype(np.int64)
    if same_index:
        span = int(max(s_edge.max(initial=0), t_edge.max(initial=0))) + 1
        s_edge = s_own * span + s_edge
        t_edge = t_own * span + t_edge
    order = np.argsort(t_edge, kind="stable")
    te_sorted = t_edge[order]
    lo = np.searchsorted(te_sorted, s_edge, side="left")
    hi = np.searchsorted(te_sorted, s_edge, side="right")
    cnt = hi - lo
    if not cnt.any():
        return set()
    si = np.repeat(np.arange(len(s_edge)), cnt)
    first = np.cumsum(cnt) - cnt
    ti = order[np.repeat(lo, cnt) + np.arange(int(cnt.sum())) - np.repeat(first, cnt)]
    behind = cs.fraction[s_rows[si]] > ct.fraction[t_rows[ti]]
    return set(zip(s_own[si[behind]].tolist(), t_own[ti[behind]].tolist(), strict=True))


@dataclass
class _Point:
    lon: float
    lat: float
    search_radius: float | None = None


def _plain(loc) -> bool:
    return (loc.heading is None and loc.preferred_side in (None, "either") and not loc.street
            and loc.rank_candidates is not False)


def radii(locs):
    r = np.array([np.nan if loc.search_radius is None else loc.search_radius for loc in locs], dtype=np.float64)
    return None if np.isnan(r).all() else r


def _cand(cset, rows) -> dict:
    return {"edge": cset.edge[rows].astype(np.int64), "fraction": cset.fraction[rows].astype(np.float64),
            "lon": cset.lon[rows], "lat": cset.lat[rows], "distance": cset.distance[rows]}


@dataclass
class Searched:
    """A route request's search: the profile, each location's candidates, the pieces between consecutive
    locations (one `Leg` each) and the warnings for options that cannot act here."""

    prof: Profile
    cands: list
    pieces: list[Leg]
    notes: list[str]


@dataclass
class _CandArrays:
    edge: np.ndarray
    fraction: np.ndarray
    lon: np.ndarray
    lat: np.ndarray
    distance: np.ndarray


@dataclass
class MatrixResult:
    """time_s, distance_m: float64[N, M] (inf = no route; NaN = a point not on the network, with
    engine.matrix(..., unsnappable="nan")); sources, targets: snapped (lon, lat) [N|M, 2] (NaN where not
    snapped); snapped, snap_distance_m: (sources, targets) pairs of bool / metre arrays, set by
    engine.matrix (see geoengine.services.unsnappable)."""

    time_s: np.ndarray
    distance_m: np.ndarray
    sources: np.ndarray
    targets: np.ndarray
    snapped: tuple | None = None
    snap_distance_m: tuple | None = None
    #: (sources, targets): the directed edge each point snapped to (its nearest candidate)
    edges: tuple | None = None

    def to_pandas(self):
        """Long form: one row per (source, target) with time_s and distance_m (needs pandas)."""
        from geoengine.frames import matrix_frame

        return matrix_frame(self.time_s, self.distance_m)


