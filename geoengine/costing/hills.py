"""Hills in the bicycle and pedestrian costings: travel time from the edge grades, and the `use_hills`
penalty. Needs a graph with grades (`geoengine.elevation.grades.attach_grades`); without them every
function here leaves times as they are and adds no penalty.

An edge with climb C at (climb-weighted mean) up-grade g and descent D at down-grade d is taken as a
flat part, a uniform climb of length C / g and a uniform descent of length D / d (docs/elevation.md
says why that stand-in is faithful). Then, with v the edge's flat speed:

- bicycle, climbing: speed factor 1 / (1 + 10 g + 20 g**2) (x0.65 at 5 %, x0.45 at 10 %, x0.34 at
  15 %); the climb's extra time is exactly C (10 + 20 g) / v. Descending: x(1 + 4 d), at most x1.5
  and never above max(v, 40 km/h).
- pedestrian: Tobler's hiking function relative to the flat, exp(-3.5 |s + 0.05|) / exp(-0.175) at
  signed slope s: x0.70 at +10 %, x1.19 at -5 % (the fastest), x1.0 at -10 %, x0.70 at -20 %.
- `use_hills` u (0..1) adds to the cost (not the time) `A(u) * t * (s / s_ref)**2` for the time t
  spent on each stretch, A(u) = 2 (1 - u)**2 (2 at 0, 0.5 at the default 0.5, 0 at 1), the factor
  `(s / s_ref)**2` capped at 50. Bicycle: climbs only, s_ref 5 % (at u = 0 a 5 % climb costs x3 its
  time, a 10 % climb x9). Pedestrian: climbs with s_ref 10 %, and descents steeper than 10 % by
  their excess over 10 % (knees), s_ref 10 %. u = 1 leaves the cost to time alone.
"""

from __future__ import annotations

import numpy as np

BIKE_CLIMB_A = 10.0
BIKE_CLIMB_B = 20.0
BIKE_DOWNHILL_GAIN = 4.0
BIKE_DOWNHILL_MAX_FACTOR = 1.5
BIKE_DOWNHILL_MAX_KPH = 40.0
TOBLER_K = 3.5
TOBLER_OFFSET = 0.05
AVOIDANCE = 2.0
MAX_PENALTY_FACTOR = 50.0
BIKE_GRADE_REF = 0.05
WALK_GRADE_REF = 0.10
WALK_STEEP_DESCENT = 0.10


def avoidance(use_hills: float) -> float:
    """A(u) = 2 (1 - u)^2: weight of the hill penalty."""
    return AVOIDANCE * (1.0 - float(use_hills)) ** 2


class Profile:
    """Per directed edge: climb and descent (m), their grades, and the lengths of the equivalent
    uniform climb and descent (m), all float64[E]."""

    def __init__(self, graph, length: np.ndarray):
        self.climb = np.asarray(graph.edge_climb, dtype=np.float64)
        self.descent = np.asarray(graph.edge_descent, dtype=np.float64)
        self.up = np.asarray(graph.edge_up_grade, dtype=np.float64)
        self.down = np.asarray(graph.edge_down_grade, dtype=np.float64)
        up_len = np.divide(self.climb, self.up, out=np.zeros_like(self.climb), where=self.up > 1e-6)
        down_len = np.divide(self.descent, self.down, out=np.zeros_like(self.descent), where=self.down > 1e-6)
        # the stand-in lengths never exceed the edge (guards rounding of float32 grades)
        total = up_len + down_len
        shrink = np.divide(length, total, out=np.ones_like(total), where=total > length)
        self.up_len = up_len * np.minimum(shrink, 1.0)
        self.down_len = down_len * np.minimum(shrink, 1.0)
        self.flat_len = np.maximum(length - self.up_len - self.down_len, 0.0)


def profile_of(graph, length: np.ndarray) -> Profile | None:
    """The hill profile of `graph`'s edges, or None when the graph carries no grades."""
    if not graph.meta.get("grades") or getattr(graph, "edge_climb", None) is None:
        return None
    return Profile(graph, length)


def _penalty_factor(grade: np.ndarray, ref: float) -> np.ndarray:
    return np.minimum((grade / ref) ** 2, MAX_PENALTY_FACTOR)


def bicycle(p: Profile, speed_kph: np.ndarray, use_hills: float, affected: np.ndarray):
    """(moving time s, hill penalty s) per edge for a bicycle riding at `speed_kph` on the flat;
    edges not `affected` (steps, ferries: walked or carried) keep length / speed and no speed change,
    but pay the penalty."""
    v = speed_kph / 3.6
    up_time = p.up_len * (1.0 + BIKE_CLIMB_A * p.up + BIKE_CLIMB_B * p.up**2) / v
    v_down = np.minimum(v * np.minimum(1.0 + BIKE_DOWNHILL_GAIN * p.down, BIKE_DOWNHILL_MAX_FACTOR),
                        np.maximum(v, BIKE_DOWNHILL_MAX_KPH / 3.6))
    hilly = p.flat_len / v + up_time + p.down_len / v_down
    flat = (p.flat_len + p.up_len + p.down_len) / v
    time_s = np.where(affected, hilly, flat)
    climb_time = np.where(affected, up_time, p.up_len / v)
    penalty = avoidance(use_hills) * climb_time * _penalty_factor(p.up, BIKE_GRADE_REF)
    return time_s, penalty


def tobler(slope: np.ndarray) -> np.ndarray:
    """Walking speed factor at a signed slope, relative to the flat (Tobler's hiking function)."""
    return np.exp(-TOBLER_K * np.abs(slope + TOBLER_OFFSET)) / np.exp(-TOBLER_K * TOBLER_OFFSET)


def pedestrian(p: Profile, speed_kph: np.ndarray, use_hills: float, affected: np.ndarray):
    """(walking time s, hill penalty s) per edge at `speed_kph` on the flat; edges not `affected`
    (steps: already walked slowly) keep their speed but pay the penalty."""
    v = speed_kph / 3.6
    up_time = p.up_len / (v * tobler(p.up))
    down_time = p.down_len / (v * tobler(-p.down))
    hilly = p.flat_len / v + up_time + down_time
    flat = (p.flat_len + p.up_len + p.down_len) / v
    time_s = np.where(affected, hilly, flat)
    up_t = np.where(affected, up_time, p.up_len / v)
    down_t = np.where(affected, down_time, p.down_len / v)
    steep = np.maximum(p.down - WALK_STEEP_DESCENT, 0.0)
    penalty = avoidance(use_hills) * (up_t * _penalty_factor(p.up, WALK_GRADE_REF)
                                      + down_t * _penalty_factor(steep, WALK_GRADE_REF))
    return time_s, penalty
