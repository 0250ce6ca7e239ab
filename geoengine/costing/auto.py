"""Motor-vehicle costings: auto, auto_shorter, bus, taxi (and the shared motor model used by truck)."""

from __future__ import annotations

import numpy as np

from geoengine.costing.common import (
    DESTINATION_PENALTY_S,
    HIGHWAY_CLASSES,
    MOTOR_SIGNAL_DELAY_S,
    MOTOR_SURFACE_SPEED,
    TAGGED_SPEED_FACTOR,
    EdgeView,
    finish,
    preference,
    shortest_cost,
)
from geoengine.graph import tags as T

MODE = {"auto": T.AUTO, "auto_shorter": T.AUTO, "bus": T.BUS, "taxi": T.TAXI}


def motor_time(v: EdgeView, top_speed: float) -> np.ndarray:
    """Seconds per edge: class default speed or 80 % of a tagged maxspeed (ferries: their duration),
    slowed on rough surfaces, capped at `top_speed`, plus MOTOR_SIGNAL_DELAY_S (2 s, OSRM's) per traffic
    signal passed."""
    tagged = v.flag(T.F_SPEED_TAGGED) & ~v.flag(T.F_FERRY)
    speed = v.speed * np.where(tagged, TAGGED_SPEED_FACTOR, 1.0) * MOTOR_SURFACE_SPEED[v.surface]
    speed = np.minimum(speed, top_speed)
    time_s = v.length / (np.maximum(speed, 1.0) / 3.6) + MOTOR_SIGNAL_DELAY_S * v.signals
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
    measured = cov_len / np.asarray(s.cov_time, dtype=np.float64) * 3.6
    capped = np.minimum(measured, top_speed)
    rest = np.maximum(v.length[e] - cov_len, 0.0)
    out = np.array(time_s, dtype=np.float64)
    out[e] = (cov_len / (capped / 3.6) + rest / (np.maximum(speed[e], 1.0) / 3.6)
              + MOTOR_SIGNAL_DELAY_S * v.signals[e])
    return out


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
