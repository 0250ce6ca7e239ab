"""Motor-vehicle costings: auto, auto_shorter, bus, taxi (and the shared motor model used by truck)."""

from __future__ import annotations

import numba
import numpy as np

from geoengine.costing.common import (
    DESTINATION_PENALTY_S,
    HIGHWAY_CLASSES,
    MOTOR_SURFACE_SPEED,
    TAGGED_SPEED_FACTOR,
    EdgeView,
    finish,
    motor_obstacles,
    preference,
    shortest_cost,
)
from geoengine.geo import haversine_scalar
from geoengine.graph import tags as T

MODE = {"auto": T.AUTO, "auto_shorter": T.AUTO, "bus": T.BUS, "taxi": T.TAXI}


def motor_time(v: EdgeView, top_speed: float) -> np.ndarray:
    """Seconds per edge: class default speed or 80 % of a tagged maxspeed (ferries: their duration),
    slowed on rough surfaces, capped at `top_speed`, plus the seconds of OSRM car.lua's obstacles passed
    (`EdgeView.motor_obstacles`: 2 s per traffic signal in its direction, 2 s per stop sign, 1 s per
    give-way sign, 60 s per gate)."""
    tagged = v.flag(T.F_SPEED_TAGGED) & ~v.flag(T.F_FERRY)
    speed = v.speed * np.where(tagged, TAGGED_SPEED_FACTOR, 1.0) * MOTOR_SURFACE_SPEED[v.surface]
    speed = np.minimum(speed, top_speed)
    time_s = v.length / (np.maximum(speed, 1.0) / 3.6) + v.motor_obstacles
    if v.speeds is not None and len(v.speeds.edges):
        time_s = with_measured_speeds(v, time_s, speed, top_speed)
    return time_s


def with_measured_speeds(v: EdgeView, time_s: np.ndarray, speed: np.ndarray, top_speed: float) -> np.ndarray:
    """`time_s` with the measured speeds of `v.speeds` on the edges they cover (docs/traffic.md): the
    covered metres at their measured speed (the harmonic mean over the covered pieces of the edge),
    capped at `top_speed` (no surface factor: a measured speed is what was driven), the rest of the edge
    at the profile speed `speed`, plus the signal delays as before."""
    s = v.speeds
    e = s.edges
    cov_len = np.asarray(s.cov_len, dtype=np.float64)
    rest = np.maximum(v.length[e] - cov_len, 0.0)
    out = np.array(time_s, dtype=np.float64)
    out[e] = (covered_seconds(cov_len, s.cov_time, top_speed) + rest / (np.maximum(speed[e], 1.0) / 3.6)
              + v.motor_obstacles[e])
    return out


def covered_seconds(cov_len, cov_time, top_speed: float) -> np.ndarray:
    """Seconds of the covered metres of edges at their measured mean speed (the harmonic mean over the
    covered pieces), capped at `top_speed` km/h."""
    cov_len = np.asarray(cov_len, dtype=np.float64)
    measured = cov_len / np.asarray(cov_time, dtype=np.float64) * 3.6
    return cov_len / (np.minimum(measured, top_speed) / 3.6)


def measured_piece_timing(graph, speeds, time_s: np.ndarray, top_speed: float):
    """Where the time goes along each edge the measured speeds cover piece by piece (docs/traffic.md,
    "Partial edges"): (edges int64[C] sorted, ptr int64[C+1], metres float64[N], seconds float64[N]).
    Edge edges[i] has the shape points of its segment at ptr[i]..ptr[i+1] (in the segment's own
    order), with the haversine metres from the segment's first point to each and the seconds the edge's
    travel spends on the pieces between them: a covered piece its seconds at the file's speed (scaled
    as the edge's covered metres are by the top speed), an uncovered one its metres at the profile
    speed, each piece its share by length of the edge's obstacle delays (signals, signs, gates). The
    last entry of an edge is its whole `time_s`. Empty when the speeds keep no pieces (way speeds, an older stored generation)."""
    pe = getattr(speeds, "piece_edge", None)
    if pe is None or not len(pe):
        return NO_TIMING
    pe = np.asarray(pe, dtype=np.int64)
    pstart = np.asarray(speeds.piece_start, dtype=np.int64)
    ptime = np.asarray(speeds.piece_time, dtype=np.float64)
    if len(pe) > 1 and not (np.all(pe[1:] >= pe[:-1])):
        order = np.lexsort((pstart, pe))
        pe, pstart, ptime = pe[order], pstart[order], ptime[order]
    time_s = np.asarray(time_s, dtype=np.float64)
    edges = unique_sorted(pe)
    edges = edges[np.isfinite(time_s[edges])]
    if not len(edges):
        return NO_TIMING
    off = np.asarray(graph.shape_offsets, dtype=np.int64)
    seg = edges >> 1
    ptr = np.zeros(len(edges) + 1, np.int64)
    np.cumsum(off[seg + 1] - off[seg], out=ptr[1:])
    cum_len, cum_sec = _piece_timing(edges, ptr, off, np.asarray(graph.shape_lon), np.asarray(graph.shape_lat),
                                     pe, pstart, ptime, time_s[edges], motor_obstacles(graph, edges),
                                     float(top_speed) / 3.6)
    return edges, ptr, cum_len, cum_sec


def unique_sorted(a: np.ndarray) -> np.ndarray:
    """The distinct values of a sorted array."""
    if not len(a):
        return a
    keep = np.ones(len(a), bool)
    keep[1:] = a[1:] != a[:-1]
    return a[keep]


@numba.njit(cache=True, nogil=True)
def _piece_timing(edges, ptr, off, lon, lat, pe, pstart, ptime, total, obstacles, top_ms):
    """`measured_piece_timing`'s arrays in one pass (pe, pstart sorted by edge then start)."""
    N = ptr[-1]
    cum_len = np.zeros(N)
    cum_sec = np.zeros(N)
    ftime = np.empty(N)
    j = 0
    for i in range(edges.shape[0]):
        e = edges[i]
        s = e >> 1
        a, n, base = off[s], off[s + 1] - off[s], ptr[i]
        for k in range(n):
            ftime[base + k] = -1.0  # uncovered
        while j < pe.shape[0] and pe[j] < e:
            j += 1
        while j < pe.shape[0] and pe[j] == e:
            k = pstart[j] - a
            if 0 <= k < n - 1:
                ftime[base + k] = ptime[j]
            j += 1
        length = 0.0
        cov_len = 0.0
        cov_time = 0.0
        for k in range(n - 1):
            d = haversine_scalar(lat[a + k], lon[a + k], lat[a + k + 1], lon[a + k + 1])
            cum_len[base + k + 1] = cum_len[base + k] + d
            length += d
            if ftime[base + k] >= 0.0:
                cov_len += d
                cov_time += ftime[base + k]
        tc = 0.0
        if cov_len > 0.0 and cov_time > 0.0:
            tc = max(cov_time, cov_len / top_ms)  # the covered metres at their mean speed, capped
        rest_len = max(length - cov_len, 0.0)
        tu = max(total[i] - obstacles[i] - tc, 0.0)  # the uncovered metres at the profile speed
        scale = tc / cov_time if cov_time > 0.0 else 0.0
        per_m_rest = tu / rest_len if rest_len > 0.0 else 0.0
        per_m_obs = obstacles[i] / length if length > 0.0 else 0.0
        for k in range(n - 1):
            d = cum_len[base + k + 1] - cum_len[base + k]
            sec = ftime[base + k] * scale if ftime[base + k] >= 0.0 else d * per_m_rest
            cum_sec[base + k + 1] = cum_sec[base + k] + sec + d * per_m_obs
        cum_sec[base + n - 1] = total[i]  # the edge's whole time exactly
    return cum_len, cum_sec


#: `measured_piece_timing` when nothing is timed piece by piece (every edge keeps the length share)
NO_TIMING = (np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0), np.zeros(0))


def motor_cost(v: EdgeView, time_s: np.ndarray, opts, mode_bit: int, toll_bit: int = T.F_TOLL) -> np.ndarray:
    """Time scaled by the preferences present in `opts` plus per-edge penalties."""
    cost = time_s.copy()
    factors = (
        ("use_highways", np.isin(v.cls, HIGHWAY_CLASSES)),
        ("use_tolls", v.flag(toll_bit)),
        ("use_ferry", v.flag(T.F_FERRY)),
        ("use_living_streets", v.is_class("living_street")),
        ("use_tracks", v.is_class("track")),
        ("use_trails", v.is_class("track") | v.flag(T.F_UNPAVED)),
    )
    for name, sel in factors:
        if name in opts.values:
            cost[sel] *= preference(opts[name])
    if "service_penalty" in opts.values:
        cost[v.is_class("service")] += opts["service_penalty"]
    if "country_crossing_penalty" in opts.values:
        cost[v.flag(T.F_BORDER)] += opts["country_crossing_penalty"]
    cost[(v.dest & mode_bit) != 0] += DESTINATION_PENALTY_S
    return cost


def dimension_ok(v: EdgeView, opts, pairs) -> np.ndarray:
    ok = np.ones(len(v.length), dtype=bool)
    for opt, limit in pairs:
        if opt in opts.values:
            ok &= v.limit(limit) >= opts[opt]
    return ok


def costs(graph, opts, speeds=None):
    v = EdgeView(graph, speeds)
    bit = MODE[opts.costing]
    allowed = (v.access & bit) != 0
    allowed &= dimension_ok(v, opts, (("height", "maxheight"), ("width", "maxwidth")))
    if opts["exclude_unpaved"]:
        allowed &= ~v.flag(T.F_UNPAVED)
    time_s = motor_time(v, opts["top_speed"])
    cost = shortest_cost(v, bit) if opts["shortest"] else motor_cost(v, time_s, opts, bit)
    return finish(cost, time_s, v.length, allowed)
