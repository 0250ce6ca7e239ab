"""`date_time` on routes, matrices and isochrones: the bucket's metric and the time-dependent ETA.

    sel = route_options.selection(date_time)   # Selection(bucket, current, when, kind) or None
    prof = router.profile(costing, options, bucket=sel)    # the bucket's metric (TimeOfDay.metric)
    apply_eta(router, prof, route, sel, waits) # each edge's seconds at the bucket it is entered in

What is computed (docs/traffic.md): the path is the best one for the metric of one bucket (the
departure's; arrive_by: the arrival's); then, walking the path from the departure (arrive_by: back from
the arrival), each edge's seconds are those of the bucket in which it is entered (left), the clock
counting the turn delays and waits as the route does. A matrix uses the departure bucket's metric.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from geoengine.costing import MOTOR_COSTINGS
from geoengine.traffic.profiles import BUCKETS, ProfileSet, bucket_of, eta_kernel, week_seconds
from geoengine.traffic.speeds import SpeedOverlay

OVERLAYS = 16  # bucket overlays kept per process (the customised hierarchies live in the router's LRU)


@dataclass(frozen=True)
class Selection:
    """The bucket a request's date_time selects: `bucket` (0..671), `current` (type 0: measured speeds
    win over the bucket's), `when` (the given local time) and `kind` (the date_time type)."""

    bucket: int
    current: bool
    when: datetime
    kind: int


def merge(primary: SpeedOverlay | None, secondary: SpeedOverlay | None) -> SpeedOverlay | None:
    """The edges of `primary` with their speeds, then those of `secondary` that `primary` leaves."""
    if primary is None or secondary is None:
        return primary if secondary is None else secondary
    keep = ~np.isin(secondary.edges, primary.edges)
    edges = np.concatenate([primary.edges, secondary.edges[keep]])
    order = np.argsort(edges, kind="stable")
    return SpeedOverlay(edges[order], np.concatenate([primary.cov_len, secondary.cov_len[keep]])[order],
                        np.concatenate([primary.cov_time, secondary.cov_time[keep]])[order], dict(primary.info))


class TimeOfDay:
    """A router's time-of-day profiles: the store's current ProfileSet (switched when `profiles.json`
    changes, one stat per request) and an LRU of bucket overlays."""

    def __init__(self, store):
        self.store = store
        self.stamp = None
        self.profiles: ProfileSet | None = None
        self._lock = threading.Lock()
        self._overlays: OrderedDict = OrderedDict()

    def sync(self, graph) -> bool:
        stamp = self.store.stamp()
        if stamp == self.stamp:
            return False
        with self._lock:
            stamp = self.store.stamp()
            if stamp == self.stamp:
                return False
            self.profiles = self.store.load(graph)
            self._overlays = OrderedDict()
            self.stamp = stamp
        return True

    def overlay(self, ps: ProfileSet, bucket: int) -> SpeedOverlay:
        key = (id(ps), bucket)
        with self._lock:
            got = self._overlays.get(key)
            if got is not None:
                self._overlays.move_to_end(key)
                return got
        got = ps.overlay(bucket)
        with self._lock:
            self._overlays[key] = got
            while len(self._overlays) > OVERLAYS:
                self._overlays.popitem(last=False)
        return got

    def metric(self, graph, costing: str, sel: Selection, measured: SpeedOverlay | None):
        """(speeds, key) of the bucket's metric for a costing, or None when no profiles are in force or
        the costing is not a motor costing. depart_at / arrive_by: the bucket's profile speeds, measured
        speeds on the edges without a profile; current: measured speeds first, the bucket's on the rest."""
        if costing not in MOTOR_COSTINGS:
            return None
        self.sync(graph)
        ps = self.profiles
        if ps is None:
            return None
        hist = self.overlay(ps, sel.bucket)
        speeds = merge(measured, hist) if sel.current else merge(hist, measured)
        return speeds, ("tod", ps.generation, sel.bucket, bool(sel.current and measured is not None))


def top_speed_ms(prof) -> float:
    """The costing's cap on measured speeds (docs/traffic.md), in m/s (inf when it has none)."""
    v = prof.options.get("top_speed") if hasattr(prof.options, "get") else None
    if v is None:
        from geoengine.costing.motorcycle import TOP_SPEED

        v = TOP_SPEED.get(prof.costing, math.inf)
    return float(v) / 3.6


def turn_delays(prof, edges: np.ndarray) -> np.ndarray:
    """float64[n]: the turn delay before each edge of a path (the mode's delay for the turn, as
    the route's time counts it; 0 for the first edge and where consecutive edges have no arc)."""
    from geoengine.costing import turn_penalty
    from geoengine.graph.turns import turn_base

    n = len(edges)
    out = np.zeros(n)
    tdelay = turn_penalty(prof.costing)
    if n < 2 or tdelay is None:
        return out
    off, tgt, _w, _packed = prof.turn_csr()
    a, b = edges[:-1], edges[1:]
    lo, hi = off[a], off[a + 1]
    # the arc a -> b among a's arcs (a node's out-degree: a few), vectorised over the path
    width = int((hi - lo).max()) if len(lo) else 0
    arc = np.full(n - 1, -1, np.int64)
    for j in range(width):
        pos = lo + j
        ok = (pos < hi) & (arc < 0)
        hit = ok & (tgt[np.minimum(pos, len(tgt) - 1)] == b)
        arc[hit] = pos[hit]
    found = arc >= 0
    out[1:][found] = turn_base(prof.graph).penalty(tdelay, prof.base_index[arc[found]], prof.mode)
    return out


def in_force(router) -> bool:
    tod = getattr(router, "time_of_day", None)
    if tod is None:
        return False
    tod.sync(router.graph)
    return tod.profiles is not None


def apply_eta(router, prof, route, sel: Selection, waits) -> None:
    """Each leg's and maneuver's seconds, and each edge's (`edge_time_s`), replaced by the time-dependent
    ones (module docstring), in place. Nothing changes for a costing without profiles."""
    tod = getattr(router, "time_of_day", None)
    ps = tod.profiles if tod is not None else None
    if ps is None or prof.costing not in MOTOR_COSTINGS or not route.legs:
        return
    locs = route.locations
    w = np.zeros(len(locs)) if waits is None else np.asarray(waits, dtype=np.float64)
    top = top_speed_ms(prof)
    backward = sel.kind == 2
    bounds = [0] + [i for i in range(1, len(locs) - 1) if locs[i].type in ("break", "break_through")] + [len(locs) - 1]
    # the waits each leg's time holds: at its locations after the first (and at the origin for leg 0)
    leg_wait = [float(w[a + 1:b + 1].sum()) + (float(w[0]) if k == 0 else 0.0)
                for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))]
    # forward: the clock starts at the departure after the origin's wait; backward: at the arrival at
    # the last location (before its wait), as route_options.apply_date_time counts
    t = week_seconds(sel.when) + (0.0 if backward else float(w[0]))
    order = range(len(route.legs) - 1, -1, -1) if backward else range(len(route.legs))
    for k in order:
        leg = route.legs[k]
        edges = np.ascontiguousarray(leg.edges, np.int64)
        covered = np.ascontiguousarray(leg.covered, np.float64)
        seconds = np.ascontiguousarray(leg.edge_time_s if leg.edge_time_s is not None
                                       else prof.time[edges] * covered, np.float64)
        pos = np.minimum(np.searchsorted(ps.covered, edges), max(len(ps.covered) - 1, 0))
        cov_index = (np.where(ps.covered[pos] == edges, pos, -1) if len(ps.covered)
                     else np.full(len(edges), -1)).astype(np.int64)
        delays = turn_delays(prof, edges)
        new = eta_kernel(edges, covered, seconds, delays, cov_index, ps.ptr, ps.length, ps.profile, ps.all_speeds,
                         ps.cov_len, top, t, sel.bucket, backward)
        # the leg's time: its edges at their buckets, its turn delays and its waits (exact, where the
        # search's total is rounded to 0.1 s per arc)
        leg.time_s = float(new.sum() + delays.sum()) + leg_wait[k]
        for m in leg.maneuvers or []:
            m.time_s = float(m.time_s) + float((new[m.begin_edge:m.end_edge] - seconds[m.begin_edge:m.end_edge]).sum())
        leg.edge_time_s = new
        travel = leg.time_s - leg_wait[k]
        if backward:
            # before this leg's travel: the wait at its first location (the previous leg's last)
            t -= travel + (float(w[bounds[k]]) if k > 0 else 0.0)
        else:
            t += travel + leg_wait[k] - (float(w[0]) if k == 0 else 0.0)


__all__ = ["BUCKETS", "Selection", "TimeOfDay", "apply_eta", "bucket_of", "in_force", "merge", "top_speed_ms"]
