"""Synthetic GPS traces made from real routes: route with the engine's router (independent of the
matcher), resample the route shape every `step_m` metres, remember the true directed edge of every
sample, and add Gaussian noise of `noise_m` metres (fixed seed)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geoengine.geo import EARTH_RADIUS_M, haversine_m
from geoengine.routing.pieces import piece_geometry
from geoengine.services.models import Location

M_PER_DEG = EARTH_RADIUS_M * np.pi / 180.0


@dataclass
class Trace:
    lon: np.ndarray  # noisy
    lat: np.ndarray
    true_lon: np.ndarray
    true_lat: np.ndarray
    true_edge: np.ndarray  # directed edge id per sample
    junction_m: np.ndarray  # metres along the route from the true position to the nearest edge end
    edges: np.ndarray  # the route's directed edges
    shape_lon: np.ndarray  # the route's exact shape
    shape_lat: np.ndarray
    length_m: float


def route_trace(engine, a, b, *, costing="auto", step_m=15.0, noise_m=10.0, seed=0) -> Trace:
    router = engine.router
    prof = router.profile(costing)
    locs = [Location(lon=a[0], lat=a[1]), Location(lon=b[0], lat=b[1])]
    _, pieces = router.route_legs(prof, locs)
    leg = pieces[0]
    lon, lat, begin, end, _ = piece_geometry(engine.graph, leg)
    seg = haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:])
    cum = np.r_[0.0, np.cumsum(seg)]
    s = np.arange(0.0, cum[-1], step_m)
    k = np.clip(np.searchsorted(cum, s, side="right") - 1, 0, len(seg) - 1)
    t = (s - cum[k]) / np.maximum(seg[k], 1e-9)
    tl = lon[k] + t * (lon[k + 1] - lon[k])
    ta = lat[k] + t * (lat[k + 1] - lat[k])
    # edge i covers shape pieces begin[i] .. end[i]-1
    ei = np.searchsorted(end, k, side="right")
    ei = np.minimum(ei, len(leg.edges) - 1)
    true_edge = np.asarray(leg.edges)[ei]
    junction_m = np.minimum(s - cum[begin[ei]], cum[end[ei]] - s)
    rng = np.random.default_rng(seed)
    dx, dy = rng.normal(0.0, noise_m, size=(2, len(s)))
    nl = tl + dx / (M_PER_DEG * np.cos(np.radians(ta)))
    na = ta + dy / M_PER_DEG
    return Trace(nl, na, tl, ta, true_edge, junction_m, np.asarray(leg.edges), lon, lat, float(cum[-1]))
