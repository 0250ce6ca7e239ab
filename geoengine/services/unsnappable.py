"""`unsnappable="nan"` for engine.matrix and engine.route_many, and route_many's geometry.

With "raise" (the default) a point with no usable road within reach fails the whole call with one
`Unsnappable` naming every such point. With "nan" those points are left out of the search and their
rows / columns / pairs are NaN (NaN = not on the network; inf = on the network but no route); the result
carries `snapped` (bool) and `snap_distance_m` (metres from the point to where it snapped, NaN where it
did not). The snappable points get exactly the answers the same call without the others gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from geoengine.errors import InvalidRequest, Unsnappable

UNSNAPPABLE = ("raise", "nan")


class MatrixSnap(NamedTuple):
    sources: np.ndarray
    targets: np.ndarray


class PairSnap(NamedTuple):
    origins: np.ndarray
    destinations: np.ndarray


def check_mode(unsnappable) -> str:
    if unsnappable not in UNSNAPPABLE:
        raise InvalidRequest.field("unsnappable", f"must be one of: {', '.join(UNSNAPPABLE)}")
    return unsnappable


def snap_status(router, prof, pts: np.ndarray, field: str):
    """(snapped bool[n], snap distance m float[n], NaN where not) of plain (lon, lat) points: the
    router's own grid candidates (the rules matrix and route_many snap by), one kernel call per distinct
    point."""
    n = len(pts)
    ok = np.zeros(n, dtype=bool)
    dist = np.full(n, np.nan)
    if n == 0:
        return ok, dist
    uniq, inv = np.unique(pts, axis=0, return_inverse=True)
    inv = inv.ravel()
    first = np.full(len(uniq), -1, dtype=np.int64)
    first[inv[::-1]] = np.arange(n)[::-1]
    u_ok = np.zeros(len(uniq), dtype=bool)
    u_d = np.full(len(uniq), np.nan)
    grid = router.grid
    for k, (lon, lat) in enumerate(uniq.tolist()):
        try:
            _e, _f, _lo, _la, d = grid.candidates(lon, lat, None, prof.usable, prof.component, int(first[k]), field)
        except Unsnappable:
            continue
        u_ok[k] = True
        u_d[k] = float(d[0])
    return u_ok[inv], u_d[inv]


@dataclass
class RouteManyResult:
    """Pairs origins[i] -> destinations[i]: time_s, distance_m float64[n] (inf = no route, NaN = a point
    not on the network); snapped, snap_distance_m: PairSnap(origins, destinations) of arrays; geometry:
    shapely LineStrings (None where no route) when asked. Unpacks as (time_s, distance_m)."""

    time_s: np.ndarray
    distance_m: np.ndarray
    snapped: PairSnap
    snap_distance_m: PairSnap
    geometry: list | None = None

    def __iter__(self):  # `t, d = engine.route_many(...)` keeps working
        return iter((self.time_s, self.distance_m))

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame({"pair": np.arange(len(self.time_s)), "time_s": self.time_s,
                             "distance_m": self.distance_m, "origin_snapped": self.snapped.origins,
                             "destination_snapped": self.snapped.destinations,
                             "origin_snap_distance_m": self.snap_distance_m.origins,
                             "destination_snap_distance_m": self.snap_distance_m.destinations})

    def to_geopandas(self):
        if self.geometry is None:
            raise InvalidRequest.field("geometry", "this result has no geometry: call route_many(..., geometry=True)")
        import geopandas as gpd

        return gpd.GeoDataFrame(self.to_pandas(), geometry=self.geometry, crs="EPSG:4326")


def matrix(router, src, dst, costing, options, unsnappable: str, **kw):
    """engine.matrix with the unsnappable policy; returns the router's MatrixResult with `snapped` and
    `snap_distance_m` (MatrixSnap) set."""
    check_mode(unsnappable)
    prof = router.profile(costing, router.parse_options(costing, options))
    ok_s, d_s = snap_status(router, prof, src, "sources")
    ok_t, d_t = snap_status(router, prof, dst, "targets")
    if unsnappable == "raise" or (ok_s.all() and ok_t.all()):
        res = router.matrix(src, dst, costing, options, **kw)
    else:
        n, m = len(src), len(dst)
        time_s = np.full((n, m), np.nan)
        dist_m = np.full((n, m), np.nan)
        s_pts = np.full((n, 2), np.nan)
        t_pts = np.full((m, 2), np.nan)
        if ok_s.any() and ok_t.any():
            sub = router.matrix(src[ok_s], dst[ok_t], costing, options, **kw)
            time_s[np.ix_(ok_s, ok_t)] = sub.time_s
            dist_m[np.ix_(ok_s, ok_t)] = sub.distance_m
            s_pts[ok_s] = sub.sources
            t_pts[ok_t] = sub.targets
        from geoengine.routing.router import MatrixResult

        res = MatrixResult(time_s, dist_m, s_pts, t_pts)
    res.snapped = MatrixSnap(ok_s, ok_t)
    res.snap_distance_m = MatrixSnap(d_s, d_t)
    return res


def route_many(router, o, d, costing, options, unsnappable: str, geometry: bool = False) -> RouteManyResult:
    """engine.route_many with the unsnappable policy and optional geometry (one exact point-to-point
    search per pair with its path unpacked, then the path's shape cut at the snapped positions)."""
    check_mode(unsnappable)
    prof = router.profile(costing, router.parse_options(costing, options))
    ok_o, d_o = snap_status(router, prof, o, "origins")
    ok_d, d_d = snap_status(router, prof, d, "destinations")
    n = len(o)
    both = ok_o & ok_d
    if unsnappable == "raise" or both.all():
        t, dist = router.route_many(o, d, costing, options)
        both = np.ones(n, dtype=bool)
    else:
        t = np.full(n, np.nan)
        dist = np.full(n, np.nan)
        if both.any():
            t[both], dist[both] = router.route_many(o[both], d[both], costing, options)
    geoms = _geometries(router, prof, o, d, both, t) if geometry else None
    return RouteManyResult(np.asarray(t, np.float64), np.asarray(dist, np.float64), PairSnap(ok_o, ok_d),
                           PairSnap(d_o, d_d), geoms)


def _geometries(router, prof, o, d, usable_pairs, time_s):
    """LineString per pair (None where not snapped or no route), from the same exact search as /route."""
    import shapely

    out: list = [None] * len(o)
    idx = np.flatnonzero(usable_pairs & np.isfinite(time_s))
    if not len(idx):
        return out
    cands = router.pair_candidates(prof, o[idx], d[idx])
    g = router.graph
    coords, owners = [], []
    for k, i in enumerate(idx.tolist()):
        leg = router.shortest(prof, *cands[k])
        if leg is None:
            continue
        lon, lat = g.path_shape(leg.edges, leg.f_first, leg.f_last)
        if len(lon) == 1:
            lon, lat = np.repeat(lon, 2), np.repeat(lat, 2)
        coords.append(np.column_stack([lon, lat]))
        owners.append(i)
    if coords:
        lines = shapely.linestrings(np.concatenate(coords), indices=np.repeat(np.arange(len(coords)),
                                                                               [len(c) for c in coords]))
        for i, line in zip(owners, lines.tolist(), strict=True):
            out[i] = line
    return out
