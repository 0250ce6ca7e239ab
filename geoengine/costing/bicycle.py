"""Bicycle costing: speed by bicycle type, surface and grade, road stress, surface avoidance, hills."""

from __future__ import annotations

import numpy as np

from geoengine.costing import hills
from geoengine.costing.common import SIGNAL_DELAY_S, EdgeView, finish, preference, shortest_cost
from geoengine.graph import tags as T

DESTINATION_PENALTY_S = 120.0

# Speed factor per surface class (unknown, paved_smooth, paved, paved_rough, compacted, gravel, dirt,
# impassable) and bicycle type; 0 = the type cannot ride it (excluded when avoid_bad_surfaces = 1).
SURFACE_SPEED = {
    "Road": np.array([1.0, 1.0, 0.95, 0.7, 0.5, 0.0, 0.0, 0.0]),
    "Hybrid": np.array([1.0, 1.0, 1.0, 0.85, 0.8, 0.65, 0.5, 0.0]),
    "City": np.array([1.0, 1.0, 1.0, 0.8, 0.75, 0.6, 0.45, 0.0]),
    "Cross": np.array([1.0, 1.0, 1.0, 0.9, 0.9, 0.8, 0.7, 0.4]),
    "Mountain": np.array([1.0, 0.95, 0.95, 0.95, 0.95, 0.9, 0.85, 0.6]),
}
WALK_SPEED_FACTOR = 0.3  # surfaces the type cannot ride (factor 0) are pushed at this share of the speed
# Stress of riding with motor traffic, per class; halved where a cycle lane or track is tagged.
STRESS = {"motorway": 1.0, "trunk": 1.0, "primary": 0.8, "secondary": 0.6, "tertiary": 0.4, "unclassified": 0.25,
          "residential": 0.2, "service": 0.2, "road": 0.3, "busway": 0.3, "living_street": 0.1, "track": 0.1}


def costs(graph, opts, speeds=None):  # measured motor speeds do not apply
    v = EdgeView(graph)
    btype = opts["bicycle_type"]
    allowed = (v.access & T.BICYCLE) != 0
    table = SURFACE_SPEED[btype]
    sf = table[v.surface]
    bad = sf == 0
    sf = np.where(bad, WALK_SPEED_FACTOR, sf)
    speed = opts["cycling_speed"] * sf
    steps = v.is_class("steps")
    speed = np.where(steps, 2.0, speed)
    time_s = v.length / (speed / 3.6) + SIGNAL_DELAY_S * v.signals
    penalty = 0.0
    grades = hills.profile_of(graph, v.length)
    if grades is not None:  # slower up, faster down; use_hills weighs the climbs (costing/hills.py)
        ferry = v.flag(T.F_FERRY)
        moving, penalty = hills.bicycle(grades, speed, opts["use_hills"], ~(steps | ferry))
        time_s = moving + SIGNAL_DELAY_S * v.signals
        penalty = np.where(ferry, 0.0, penalty)
    if opts["shortest"]:
        cost = shortest_cost(v, T.BICYCLE)
    else:
        stress = np.zeros(len(v.length))
        for name, s in STRESS.items():
            stress[v.cls == T.CLASS[name]] = s
        stress[v.flag(T.F_CYCLE_LANE)] *= 0.5
        cost = (time_s + penalty) * (1.0 + 4.0 * stress * (1.0 - opts["use_roads"]))
        a = opts["avoid_bad_surfaces"]
        cost *= 1.0 + 4.0 * a * (1.0 - sf)
        cost[v.flag(T.F_FERRY)] *= preference(opts["use_ferry"])
        cost[(v.dest & T.BICYCLE) != 0] += DESTINATION_PENALTY_S
    if opts["avoid_bad_surfaces"] >= 1.0:
        allowed &= ~bad
    return finish(cost, time_s, v.length, allowed)
