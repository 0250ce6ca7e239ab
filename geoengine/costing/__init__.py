"""Costings: the nine travel profiles, their option tables and vectorised edge costs.

    opts = parse_costing_options("auto", {"use_highways": 0.2})   # or default_options("auto")
    cost, time_s, length_m = edge_costs(graph, "auto", opts)      # float64[E] each, inf = not allowed

See docs/costing.md (generated from the tables by `geoengine.costing.docs.render`).
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

from geoengine.costing import auto, bicycle, motorcycle, pedestrian, truck
from geoengine.costing.schema import (
    COSTINGS,
    TABLES,
    Option,
    Options,
    check_costing,
    costing_options_schema,
    default_options,
    parse_costing_options,
)
from geoengine.graph import tags as T

__all__ = [
    "COSTINGS", "TABLES", "Option", "Options", "check_costing", "costing_options_schema", "default_options",
    "parse_costing_options", "edge_costs", "MOTOR_COSTINGS", "turn_penalty", "mode_of", "inactive_options",
    "MotorTurns", "motor_turn_seconds", "piece_timing",
]

_MODULES = {
    "auto": auto, "auto_shorter": auto, "bus": auto, "taxi": auto, "truck": truck, "bicycle": bicycle,
    "pedestrian": pedestrian, "motorcycle": motorcycle, "motor_scooter": motorcycle,
}
_MODE = {"auto": "auto", "auto_shorter": "auto", "bus": "bus", "taxi": "taxi", "truck": "truck",
         "bicycle": "bicycle", "pedestrian": "pedestrian", "motorcycle": "motorcycle",
         "motor_scooter": "motor_scooter"}


def mode_of(costing: str) -> str:
    """The travel mode (access bit name in geoengine.graph.tags.MODE_BITS) of a costing."""
    return _MODE[check_costing(costing)]


#: the costings whose travel times measured speeds replace (`edge_costs(..., speeds=)`, docs/traffic.md)
MOTOR_COSTINGS = ("auto", "auto_shorter", "bus", "taxi", "truck", "motorcycle", "motor_scooter")


def edge_costs(graph, costing: str, options: Options | None = None,
               speeds=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per directed edge of `graph`: (cost float64[E], time_s float64[E], length_m float64[E]).

    Contract: cost is what routing minimises (seconds scaled by preferences and penalties, or metres
    when `shortest`), inf where the costing may not use the edge in its direction (access, oneway,
    limits, exclusions); time_s is the travel time in seconds (inf where not allowed); length_m the
    edge length in metres. Vectorised numpy over all edges; `options` defaults to the costing's defaults.
    `speeds`: measured speeds (`geoengine.traffic.SpeedOverlay`) the motor costings use instead of their
    profile speeds where given, capped by their own top speed.
    """
    check_costing(costing)
    if options is None:
        options = default_options(costing)
    if options.costing != costing:
        raise ValueError(f"options are for costing '{options.costing}', not '{costing}'")
    return _MODULES[costing].costs(graph, options, speeds)


def piece_timing(graph, costing: str, options: Options, speeds, time_s: np.ndarray):
    """How a motor costing's time is spread along the edges measured segment speeds cover piece by
    piece (`auto.measured_piece_timing`): (edges, ptr, metres, seconds) arrays for
    `geoengine.routing.profile.offsets_kernel`, empty when there is nothing to spread (no speeds, way
    speeds, a costing that ignores measured speeds). `time_s`: the costing's times with `speeds`."""
    if speeds is None or costing not in MOTOR_COSTINGS:
        return auto.NO_TIMING
    top = options["top_speed"] if "top_speed" in options.values else motorcycle.TOP_SPEED[costing]
    return auto.measured_piece_timing(graph, speeds, time_s, float(top))


class MotorTurns:
    """The motor costings' turn delays: OSRM's car.lua model (`process_turn`, fitted by OSRM to turn
    times from real driving), right-hand traffic, in seconds (docs/costing.md, "Turn delays").

    At a junction where three or more roads the mode may drive meet, at a U-turn, or where a ferry
    meets a road, a turn of signed angle a (degrees, > 0 right) costs

        right (a >= 0): P / (1 + exp(-(13 / b * a / 180 - 6.5 * b)))
        left  (a < 0):  P / (1 + exp(-(13 * b * |a| / 180 - 6.5 / b)))

    with P = TURN_PENALTY_S (7.5 s) and b = TURN_BIAS (1.075: left turns cost more), the angle taken
    between the roads as a driver sees them (`geoengine.graph.turns.perceived_bearings`: up to about
    40 m along each road, as OSRM's representative coordinate), plus, for a left
    turn across oncoming traffic at a junction of three or more roads that is not a U-turn and whose
    roads are not roundabouts, ONCOMING_S / (1 + exp(-(13 * |a| / 180 - 3.25))) (2 s at most), plus
    U_TURN_S (20 s) for a U-turn. A node where two roads meet (a bend, a change of name or of tags)
    costs nothing. Each turn's seconds are cut to whole tenths, as OSRM stores them.
    `arcs(TurnArcs)` reads the junction (`geoengine.graph.turns.TurnBase.penalty`); called with angles
    alone, each turn is taken as one at a junction of three roads (U-turn: |angle| > 170)."""

    def __call__(self, angle: np.ndarray) -> np.ndarray:
        angle = np.asarray(angle, dtype=np.float64)
        n = angle.shape
        return motor_turn_seconds(angle, np.full(n, 3), np.abs(angle) > 170, np.zeros(n, bool), np.zeros(n, bool))

    def arcs(self, t) -> np.ndarray:
        base = t.base
        start, end = base.perceived()
        return _arcs_kernel(np.asarray(t.idx, dtype=np.int64), base.e1, base.e2, base.uturn, start, end,
                            np.asarray(t.graph.edge_dst), base.roads(t.mode), base.counted(t.mode),
                            np.asarray(t.graph.edge_flags), T.F_FERRY, T.F_ROUNDABOUT)


#: OSRM car.lua's turn model (MotorTurns): the sigmoid's ceiling, its left/right bias, the oncoming
#: traffic term's ceiling and the U-turn's seconds
TURN_PENALTY_S = 7.5
TURN_BIAS = 1.075
ONCOMING_S = 2.0
U_TURN_S = 20.0


@numba.njit(cache=True, nogil=True)
def _turn_s(a, roads, uturn, mode_change, roundabout):
    """MotorTurns' seconds of one turn (the formula above)."""
    if not (roads > 2 or uturn or mode_change):
        return 0.0
    x = abs(a) / 180.0
    b = TURN_BIAS
    if a >= 0:
        s = TURN_PENALTY_S / (1.0 + np.exp(-(13.0 / b * x - 6.5 * b)))
    else:
        s = TURN_PENALTY_S / (1.0 + np.exp(-(13.0 * b * x - 6.5 / b)))
        if not uturn and roads > 2 and not roundabout:
            s += ONCOMING_S / (1.0 + np.exp(-(13.0 * x - 3.25)))
    if uturn:
        s += U_TURN_S
    return np.floor(s * 10.0 + 1e-9) / 10.0


@numba.njit(cache=True, nogil=True)
def _seconds_kernel(angle, roads, uturn, mode_change, roundabout):
    out = np.empty(angle.shape[0])
    for i in range(angle.shape[0]):
        out[i] = _turn_s(angle[i], roads[i], uturn[i], mode_change[i], roundabout[i])
    return out


@numba.njit(cache=True, nogil=True)
def _arcs_kernel(idx, e1, e2, uturn, start, end, dst, roads, counted, flags, ferry, roundabout):
    """MotorTurns' seconds of the base turns `idx` in one pass: the angle between the perceived
    bearings, the roads at the junction (`TurnArcs.roads`: the counted ones, plus the turn's own edges
    when not counted), U-turn, ferry to road, a roundabout on either side."""
    out = np.empty(idx.shape[0])
    for i in range(idx.shape[0]):
        k = idx[i]
        a, b = e1[k], e2[k]
        ang = (np.float64(start[b]) - np.float64(end[a]) + 540.0) % 360.0 - 180.0
        fa, fb = flags[a], flags[b]
        r = np.int64(roads[dst[a]])
        if not counted[a >> 1]:
            r += 1
        if not counted[b >> 1] and (b >> 1) != (a >> 1):
            r += 1
        out[i] = _turn_s(ang, r, uturn[k], ((fa ^ fb) & ferry) != 0, ((fa | fb) & roundabout) != 0)
    return out


def motor_turn_seconds(angle, roads, uturn, mode_change, roundabout) -> np.ndarray:
    """float64[n]: MotorTurns' seconds of n turns (arrays of n: signed angle in degrees, roads meeting
    at the junction, U-turn, ferry to road or back, a roundabout on either side)."""
    a = np.ascontiguousarray(angle, dtype=np.float64).ravel()
    n = len(a)

    def arr(x, dt):
        return np.ascontiguousarray(np.broadcast_to(np.asarray(x, dtype=dt).ravel(), (n,)))

    return _seconds_kernel(a, arr(roads, np.int64), arr(uturn, np.bool_), arr(mode_change, np.bool_),
                           arr(roundabout, np.bool_))


_motor_turns = MotorTurns()


def _bike_turns(angle: np.ndarray) -> np.ndarray:
    a = np.abs(angle)
    return np.where(a < 45, 0.0, np.where(a > 170, 10.0, 2.0 * a / 180.0))


def turn_penalty(costing: str, options: Options | None = None) -> Callable[[np.ndarray], np.ndarray] | None:
    """Seconds added per turn for `geoengine.graph.turn_graph(..., turn_penalty=...)`: motor vehicles
    OSRM car.lua's model (`MotorTurns`: by angle and junction, left turns costlier, 20 s more for a
    U-turn at a dead end); bicycles a little; pedestrians and `shortest` requests nothing (None)."""
    check_costing(costing)
    if options is not None and options.get("shortest"):
        return None
    if costing == "pedestrian":
        return None
    if costing == "bicycle":
        return _bike_turns
    return _motor_turns


def inactive_options(graph, options: Options) -> list[str]:
    """Notes on options that the request set but that cannot change this graph's routes (say so to
    the caller rather than ignoring them silently): use_hills needs grade data the graph lacks."""
    notes = []
    if "use_hills" in options.given and not graph.meta.get("grades"):
        notes.append("use_hills has no effect: this bundle's graph carries no grade (elevation) data")
    _ = T
    return notes
